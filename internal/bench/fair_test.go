package bench_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
)

var crowdGVK = schema.GroupVersionKind{Group: "bench.rudder.dev", Version: "v1", Kind: "Crowd"}

// BenchmarkFairShare (issue 49): one namespace creates RUDDER_BENCH_CROWD CRs (1,500) at once;
// 5 s later a CR of another namespace is created. Reports how long that CR took to be Ready
// (s-other-ready) and how many of the crowd became Ready meanwhile, beside how long the
// crowd took to converge (s-crowd-ready, to hold against a one-namespace fleet's pace).
func BenchmarkFairShare(b *testing.B) {
	onlyOnce(b)
	n := envInt("RUDDER_BENCH_CROWD", 1500)
	namespace(b, "crowd")
	namespace(b, "bystander")
	defer deleteNamespace(b, "crowd")
	defer deleteNamespace(b, "bystander")
	start := time.Now()
	created := make(chan error, 1)
	go func() {
		created <- parallel(n, func(ctx context.Context, i int) error {
			return k8s.Create(ctx, newCR(crowdGVK, "crowd", fmt.Sprintf("crowd-%04d", i)))
		})
	}()
	time.Sleep(5 * time.Second) // the crowd's backlog is what the bystander must not wait behind
	readyBefore := count(b, crs, crowdGVK, "crowd", ready)
	other := time.Now()
	if err := k8s.Create(context.Background(), newCR(crowdGVK, "bystander", "late")); err != nil {
		b.Fatal(err)
	}
	otherReady := waitAll(b, "the bystander Ready", other, 5*time.Minute, crowdGVK, "bystander", 1, ready)
	readyAfter := count(b, crs, crowdGVK, "crowd", ready)
	if err := <-created; err != nil {
		b.Fatal(err)
	}
	crowdReady := waitAll(b, "the crowd Ready", start, 30*time.Minute, crowdGVK, "crowd", n, ready)
	b.ReportMetric(otherReady.Seconds(), "s-other-ready")
	b.ReportMetric(float64(readyAfter-readyBefore), "crowd-ready-meanwhile")
	b.ReportMetric(float64(n-readyBefore), "crowd-backlog")
	b.ReportMetric(crowdReady.Seconds(), "s-crowd-ready")
	b.ReportMetric(float64(n)/crowdReady.Seconds(), "crowd-CR/s")
	b.ReportMetric(0, "ns/op")
}
