package bench_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/rudder-operator/rudder/internal/watches"
)

// BenchmarkDependsOn: 200 App200 CRs, each depending on one of 20 Db20 CRs (the web chart
// both), are created first and wait, saying so; then the databases are created, and every app
// is installed once its database is Ready. No watch of the two kinds has a reconcile period:
// every pass is taken by an event (the app's own, or its database's change), none by a poll.
// It reports the app's passes and rudder's requests per app, from the databases' creation to
// every app Ready.
func BenchmarkDependsOn(b *testing.B) {
	onlyOnce(b)
	const apps, dbs, ns = 200, 20, "depends"
	appGVK, dbGVK := webGVK.GroupVersion().WithKind("App200"), webGVK.GroupVersion().WithKind("Db20")
	namespace(b, ns)
	if err := parallel(apps, func(ctx context.Context, i int) error {
		u := newCR(appGVK, ns, fmt.Sprintf("app-%03d", i))
		u.SetAnnotations(map[string]string{watches.AnnotationDependsOn: fmt.Sprintf("Db20/db-%02d", i%dbs)})
		return k8s.Create(ctx, u)
	}); err != nil {
		b.Fatal(err)
	}
	waiting := func(u *unstructured.Unstructured) bool {
		st, _ := u.Object["status"].(map[string]any)
		conds, _ := st["conditions"].([]any)
		for _, c := range conds {
			if m, _ := c.(map[string]any); m["type"] == "Ready" && m["reason"] == "DependencyNotReady" {
				return true
			}
		}
		return false
	}
	waitAll(b, "waiting", time.Now(), 5*time.Minute, appGVK, ns, apps, waiting)
	ctrl := map[string]string{"controller": "app200.bench.rudder.dev"}
	p0, r0 := metricSum(b, "controller_runtime_reconcile_total", ctrl), requests.Load()
	clearRequests()
	start := time.Now()
	if err := parallel(dbs, func(ctx context.Context, i int) error {
		return k8s.Create(ctx, newCR(dbGVK, ns, fmt.Sprintf("db-%02d", i)))
	}); err != nil {
		b.Fatal(err)
	}
	took := waitAll(b, "apps ready", start, 10*time.Minute, appGVK, ns, apps, ready)
	passes := metricSum(b, "controller_runtime_reconcile_total", ctrl) - p0
	reqs := requests.Load() - r0
	printRequests("while 20 databases and then their 200 apps converged")
	b.ReportMetric(took.Seconds(), "s-dbs-created-to-apps-ready")
	b.ReportMetric(passes/apps, "app-passes/app")
	b.ReportMetric(float64(reqs)/(apps+dbs), "requests/CR")
	b.ReportMetric(0, "ns/op")
	if released := count(b, crs, appGVK, ns, released(1)); released != apps {
		b.Errorf("%d of %d apps on revision 1", released, apps)
	}
}
