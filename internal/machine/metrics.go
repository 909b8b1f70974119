package machine

import (
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/rudder-operator/rudder/internal/plan"
)

// The state machine's metrics, beside the controller's (controllers/metrics.go) and
// controller-runtime's. Their gvk label is the watch's name (Watch.String).
var (
	releaseStates = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "rudder_release_state",
		Help: "1 for the phase each CR's last pass ended in (InSync, RolledBack, Held, Locked, Stalled, Failed, Paused).",
	}, []string{"gvk", "namespace", "name", "state"})
	releaseActions = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "rudder_release_actions_total",
		Help: "Release actions by kind, action (" + actionNames() + ") and result (ok, failed); an action that found nothing " +
			"to do is not counted.",
	}, []string{"gvk", "action", "result"})
	statusWrites = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "rudder_status_writes_total",
		Help: "Status patches sent; a pass that changes nothing sends none.",
	}, []string{"gvk"})
	driftCorrections = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "rudder_drift_corrections_total",
		Help: "Operands restored from their release manifest without a new revision.",
	}, []string{"gvk"})
	testRuns = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "rudder_test_runs_total",
		Help: "Runs of releases' tests (helm test) by kind, result (passed, failed) and run (release: after an install or upgrade; " +
			"periodic: test.interval).",
	}, []string{"gvk", "result", "run"})
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
)

func init() {
	metrics.Registry.MustRegister(releaseStates, releaseActions, statusWrites, driftCorrections, testRuns, hookSeconds, actionSeconds)
}

func observeHook(gvk, phase string, took time.Duration, err error) {
	result := "ok"
	if err != nil {
		result = "error"
	}
	hookSeconds.WithLabelValues(gvk, phase, result).Observe(took.Seconds())
}

// countTestRun counts a run of a release's tests of kind gvk.
func countTestRun(gvk string, passed, periodic bool) {
	result, run := "failed", "release"
	if passed {
		result = "passed"
	}
	if periodic {
		run = "periodic"
	}
	testRuns.WithLabelValues(gvk, result, run).Inc()
}

// actionNames is plan.Actions as the actions metric's help lists them.
func actionNames() string {
	names := make([]string, len(plan.Actions))
	for i, a := range plan.Actions {
		names[i] = string(a)
	}
	return strings.Join(names, ", ")
}
