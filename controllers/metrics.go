package controllers

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// rudder's own metrics, beside controller-runtime's (reconcile totals, errors, queue depth, …).
var (
	releaseStates = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "rudder_release_state",
		Help: "1 for the phase each CR's last pass ended in (InSync, RolledBack, Held, Locked, Stalled, Failed, Paused).",
	}, []string{"gvk", "namespace", "name", "state"})
	releaseActions = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "rudder_release_actions_total",
		Help: "Release actions by kind, action (install, upgrade, rollback, rollback-to, test, unlock, supersede, adopt, reapply, remove-failed-install, finish-uninstall, uninstall) and result (ok, failed); an action that found nothing to do is not counted.",
	}, []string{"gvk", "action", "result"})
	statusWrites = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "rudder_status_writes_total",
		Help: "Status patches sent; a pass that changes nothing sends none.",
	}, []string{"gvk"})
	cacheBehind = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "rudder_cache_behind_total",
		Help: "Passes that ended early because the API server held a newer version of the CR than the cache read (a conflict on rudder's finalizer); the CR is taken again when the cache shows it.",
	}, []string{"gvk"})
	driftCorrections = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "rudder_drift_corrections_total",
		Help: "Operands restored from their release manifest without a new revision.",
	}, []string{"gvk"})
	hookSeconds = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "rudder_hook_duration_seconds",
		Help:    "Duration of Go hooks by kind, phase (pre, post) and result.",
		Buckets: prometheus.ExponentialBuckets(0.0005, 4, 8),
	}, []string{"gvk", "phase", "result"})
	actionSeconds = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "rudder_release_action_duration_seconds",
		Help:    "Duration of release actions (the render, Helm's action and its waits) by kind, action and result (ok, failed, retry, blocked).",
		Buckets: prometheus.ExponentialBuckets(0.01, 3, 10),
	}, []string{"gvk", "action", "result"})
	rollouts = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "rudder_rollouts_total",
		Help: "Rollouts of chart edits by kind and outcome (Complete, Halted with onHalt hold, RolledBack, Superseded).",
	}, []string{"gvk", "outcome"})
	rolloutCRs = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "rudder_rollout_crs",
		Help: "CRs of a kind with a rollout policy, by the chart digest their release is on (none: no release yet).",
	}, []string{"gvk", "digest"})
	passSeconds = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "rudder_reconcile_pass_seconds",
		Help:    "Duration of reconcile passes by kind and result.",
		Buckets: prometheus.ExponentialBuckets(0.0005, 4, 10),
	}, []string{"gvk", "result"})
)

func init() {
	metrics.Registry.MustRegister(releaseStates, releaseActions, statusWrites, cacheBehind, driftCorrections, hookSeconds, actionSeconds, passSeconds, rollouts, rolloutCRs)
}

func outcomeLabel(err error) string {
	if err != nil {
		return "error"
	}
	return "ok"
}

// gvk labels are the watch's name (Watch.String), as on every rudder metric.

func observeHook(gvk, phase string, took time.Duration, err error) {
	hookSeconds.WithLabelValues(gvk, phase, outcomeLabel(err)).Observe(took.Seconds())
}

func observeReconcile(gvk string, took time.Duration, err error) {
	passSeconds.WithLabelValues(gvk, outcomeLabel(err)).Observe(took.Seconds())
}
