package render

import (
	"errors"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// The render pool's metrics, registered on controller-runtime's registry.
var (
	renderSeconds = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "rudder_render_duration_seconds",
		Help:    "Duration of chart renders on the render workers, waits for a worker and for memory included, by result (ok, failed, exceeded).",
		Buckets: prometheus.ExponentialBuckets(0.005, 2.5, 10),
	}, []string{"result"})
	rendersWaitingForMemory = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "rudder_renders_waiting_for_memory",
		Help: "Renders waiting for their memory bound to fit --render-memory-budget.",
	})
)

func init() { metrics.Registry.MustRegister(renderSeconds, rendersWaitingForMemory) }

// observeRender records one render that started at start and ended with err.
func observeRender(start time.Time, err error) {
	result := "ok"
	var ee *ExceededError
	switch {
	case errors.As(err, &ee):
		result = "exceeded"
	case err != nil:
		result = "failed"
	}
	renderSeconds.WithLabelValues(result).Observe(time.Since(start).Seconds())
}
