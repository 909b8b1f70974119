package controllers

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// rudder's own metrics, beside controller-runtime's (reconcile totals, errors, queue depth,
// …) and the state machine's (internal/machine/metrics.go).
var (
	cacheBehind = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "rudder_cache_behind_total",
		Help: "Passes that ended early because the API server held a newer version of the CR than the cache read (a conflict on rudder's " +
			"finalizer); the CR is taken again when the cache shows it.",
	}, []string{"gvk"})
	rollouts = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "rudder_rollouts_total",
		Help: "Rollouts of chart edits by kind and outcome (Complete, Halted with onHalt hold, RolledBack, Superseded).",
	}, []string{"gvk", "outcome"})
	rolloutCRs = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "rudder_rollout_crs",
		Help: "CRs of a kind with a rollout policy, by the chart digest their release is on (none: no release yet).",
	}, []string{"gvk", "digest"})
	sourceChanges = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "rudder_values_source_changes_total",
		Help: "Changes seen to a values source (valuesFrom), per CR that reads it, by the CR's kind; each queues the CR after the " +
			"chart's quiet period.",
	}, []string{"gvk"})
	passSeconds = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "rudder_reconcile_pass_seconds",
		Help:    "Duration of reconcile passes by kind and result.",
		Buckets: prometheus.ExponentialBuckets(0.0005, 4, 10),
	}, []string{"gvk", "result"})
)

func init() {
	metrics.Registry.MustRegister(cacheBehind, passSeconds, rollouts, rolloutCRs, sourceChanges)
}

func outcomeLabel(err error) string {
	if err != nil {
		return "error"
	}
	return "ok"
}

// gvk labels are the watch's name (Watch.String), as on every rudder metric.

func observeReconcile(gvk string, took time.Duration, err error) {
	passSeconds.WithLabelValues(gvk, outcomeLabel(err)).Observe(took.Seconds())
}
