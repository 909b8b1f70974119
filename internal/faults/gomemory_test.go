package faults_test

import (
	"context"
	"errors"
	"io"
	"math"
	"net/http"
	"strconv"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/rudder-operator/rudder/internal/crtest"
	"github.com/rudder-operator/rudder/internal/render"
)

// TestGoRuntimeMemoryPolicy: rudder's process runs with its own GOGC, and with a soft memory
// limit of its share of its container's (what the render budget leaves), as its /metrics
// report them; GOGC and GOMEMLIMIT in its environment win.
func TestGoRuntimeMemoryPolicy(t *testing.T) {
	crtest.NeedsCluster(t)
	const budget = 768 << 20
	wantLimit := float64(math.MaxInt64) // the runtime's "no limit"
	if limit, ok := render.MemoryLimit(); ok && limit > budget {
		wantLimit = float64(limit - budget) // CI's machine may run the tests in a container
	}
	for _, c := range []struct {
		name        string
		env         []string
		gogc, limit float64
	}{
		{"rudder's", nil, 50, wantLimit},
		{"the environment's", []string{"GOGC=200", "GOMEMLIMIT=300MiB"}, 200, 300 << 20},
	} {
		port := freePort(t)
		r := startEnv(t, "gomemory", binary, c.env, "--metrics-bind-address", "127.0.0.1:"+port, "--metrics-secure=false",
			"--render-memory-budget", strconv.Itoa(budget))
		got := scrapeGauges(t, r, "http://127.0.0.1:"+port+"/metrics", "go_gc_gogc_percent", "go_gc_gomemlimit_bytes")
		if got[0] != c.gogc || got[1] != c.limit {
			t.Errorf("%s: GOGC %v, memory limit %v; want %v, %v", c.name, got[0], got[1], c.gogc, c.limit)
		}
		r.kill()
	}
}

// scrapeGauges reads the values of the named series from the process's /metrics, once it
// serves them.
func scrapeGauges(t *testing.T, r *replica, url string, names ...string) []float64 {
	t.Helper()
	var body []byte
	var last error
	err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		select {
		case <-r.done:
			return false, errors.New("rudder exited:\n" + tail(r.logs()))
		default:
		}
		resp, err := http.Get(url)
		if err != nil {
			last = err // the endpoint comes up
			return false, nil
		}
		defer resp.Body.Close()
		body, err = io.ReadAll(resp.Body)
		return err == nil, err
	})
	if err != nil {
		t.Fatalf("rudder's metrics: %v (last: %v)", err, last)
	}
	out := make([]float64, len(names))
	for i, n := range names {
		out[i] = crtest.SeriesSum(string(body), n, nil)
	}
	return out
}
