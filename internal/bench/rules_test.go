package bench_test

import (
	"path/filepath"
	"testing"
	"time"

	"helm.sh/helm/v4/pkg/chart/v2/loader"

	"github.com/rudder-operator/rudder/internal/guard"
	"github.com/rudder-operator/rudder/internal/helm"
)

// BenchmarkObjectRules (issue 49): what the rules that read a release's objects together —
// identities, grants, the Pod Security Standards, externalIPs, references — cost per install
// of the bench's chart (a Deployment and a Service), on the manifest rudder renders for it.
// No control plane: it runs the check alone, many times, for a figure per install.
func BenchmarkObjectRules(b *testing.B) {
	ch, err := loader.Load(filepath.Join("testdata", "charts", "web"))
	if err != nil {
		b.Fatal(err)
	}
	rel, err := helm.Render(&helm.Request{Scope: helm.Scope{Confinement: guard.Confinement{Namespace: "fleet"}},
		ReleaseName: "web-000", Chart: ch, Values: map[string]any{"replicas": 1, "port": 8080, "image": "nginx"}}, helm.StaticMapper(), nil)
	if err != nil {
		b.Fatal(err)
	}
	c := guard.Confinement{Namespace: "fleet"}
	check := func() {
		if err := c.CheckObjectRules(rel, nil); err != nil {
			b.Fatal(err)
		}
	}
	// make bench runs each benchmark once (-benchtime 1x): the figure is the mean of a fixed
	// count of checks.
	const n = 2000
	allocs := testing.AllocsPerRun(100, check)
	start := time.Now()
	for range n {
		check()
	}
	b.ReportMetric(float64(time.Since(start).Microseconds())/n, "µs/install")
	b.ReportMetric(allocs, "allocs/install")
	b.ReportMetric(0, "ns/op")
}
