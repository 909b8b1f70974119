package chartsource

import (
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// Collectors follow controller-runtime's convention: created once, registered on its registry.
var (
	reloadsTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "rudder_chart_reloads_total",
		Help: "Chart loads by chart directory and result (ok, failed, recovered).",
	}, []string{"chart", "result"})
	chartInfo = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "rudder_chart_info",
		Help: "The chart snapshot in use: 1 for the current version and digest of each chart.",
	}, []string{"chart", "version", "digest"})
	reloadSeconds = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "rudder_chart_load_seconds",
		Help: "Time to read, lint and load a chart.",
	}, []string{"chart"})
	changeToSwapSeconds = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "rudder_chart_change_to_swap_seconds",
		Help:    "Time from the first file event of a change to the new snapshot being swapped in (includes the debounce).",
		Buckets: []float64{0.5, 1, 1.5, 2, 3, 5, 10, 30, 60},
	}, []string{"chart"})
	watcherRestarts = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "rudder_chart_watcher_restarts_total",
		Help: "Times the fsnotify watcher failed (e.g. queue overflow) and was rebuilt.",
	})
)

func init() {
	metrics.Registry.MustRegister(reloadsTotal, chartInfo, reloadSeconds, changeToSwapSeconds, watcherRestarts)
}
