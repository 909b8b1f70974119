package config_test

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"

	_ "github.com/rudder-operator/rudder/internal/render" // its metrics
)

// dashboard is the part of a Grafana dashboard the test reads.
type dashboard struct {
	Panels []struct {
		Title   string `json:"title"`
		Targets []struct {
			Expr string `json:"expr"`
		} `json:"targets"`
	} `json:"panels"`
	Templating struct {
		List []struct {
			Definition string `json:"definition"`
		} `json:"list"`
	} `json:"templating"`
}

// metricName is a metric of rudder's or of controller-runtime's in a query.
var metricName = regexp.MustCompile(`\b(rudder|controller_runtime|workqueue)_[a-z0-9_]+`)

// TestDashboardQueriesExportedMetrics: every query of config/monitoring's dashboard names
// metrics, and each is one rudder's process exports (registered on controller-runtime's
// registry: registering another collector of that name is refused), so that a renamed or
// dropped metric fails here, not on a blank panel.
func TestDashboardQueriesExportedMetrics(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("monitoring", "dashboard.json")) // from the package directory
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("dashboard.json does not import: %v", err)
	}
	queries := map[string]string{}
	for _, p := range d.Panels {
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for i, tg := range p.Targets {
			queries[p.Title+" #"+string(rune('A'+i))] = tg.Expr
		}
	}
	for _, v := range d.Templating.List {
		if v.Definition != "" {
			queries["variable "+v.Definition] = v.Definition
		}
	}
	for where, q := range queries {
		names := metricName.FindAllString(q, -1)
		if len(names) == 0 {
			t.Errorf("%s: %q names no metric of rudder's", where, q)
		}
		for _, n := range names {
			if !exported(n) {
				t.Errorf("%s: %s is not a metric rudder exports", where, n)
			}
		}
	}
}

// exported reports whether a metric of that name (a histogram's series by their base name)
// is registered: another collector of the name is refused.
func exported(name string) bool {
	for _, suffix := range []string{"_bucket", "_sum", "_count"} {
		if base, ok := strings.CutSuffix(name, suffix); ok && exported(base) {
			return true
		}
	}
	probe := prometheus.NewGauge(prometheus.GaugeOpts{Name: name, Help: "probe"})
	if err := metrics.Registry.Register(probe); err != nil {
		var are prometheus.AlreadyRegisteredError
		return errors.As(err, &are) || strings.Contains(err.Error(), "same fully-qualified name")
	}
	metrics.Registry.Unregister(probe)
	return false
}

// TestMonitoringBuilds: config/monitoring builds with kustomize, as kubectl apply -k does.
func TestMonitoringBuilds(t *testing.T) {
	m, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), "monitoring")
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[string]bool{}
	for _, r := range m.Resources() {
		kinds[r.GetKind()+"/"+r.GetName()] = true
	}
	for _, want := range []string{"ServiceMonitor/rudder", "ConfigMap/rudder-dashboard"} {
		if !kinds[want] {
			t.Errorf("config/monitoring makes no %s (it makes %v)", want, kinds)
		}
	}
}
