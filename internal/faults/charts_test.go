package faults_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/rudder-operator/rudder/internal/crtest"
)

// TestAChartThatDoesNotLoadStopsNoOtherKind: a watches file whose one chart fails its lint at
// start (its schema requires a value its defaults lack) used to stop rudder, leaving every
// other kind unserved. Now rudder starts, serves the other kinds, stalls that kind's CRs naming
// why, and serves them once the chart is fixed on disk, with no restart.
func TestAChartThatDoesNotLoadStopsNoOtherKind(t *testing.T) {
	crtest.NeedsCluster(t)
	chart := filepath.Join(t.TempDir(), "box")
	if out, err := exec.Command("cp", "-r", filepath.Join(root, "controllers/testdata/charts/tenantbox"), chart).CombinedOutput(); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	schema := filepath.Join(chart, "values.schema.json")
	if err := os.WriteFile(schema, []byte(`{"type": "object", "required": ["policy"], "properties": {"policy": {"type": "string"}}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	web, err := os.ReadFile(watches)
	if err != nil {
		t.Fatal(err)
	}
	var entries []string
	for line := range strings.SplitSeq(string(web), "\n") {
		if strings.Contains(line, "kind: Web,") {
			entries = append(entries, line)
		}
	}
	entries = append(entries, "- {group: test.rudder.dev, version: v1, kind: TenantBox, chart: "+chart+"}")
	wf := filepath.Join(t.TempDir(), "watches.yaml")
	if err := os.WriteFile(wf, []byte(strings.Join(entries, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r := start(t, "unloaded", "--watches-file", wf, "--chart-debounce", "200ms")

	ns := crtest.NewNamespace(t, k8s, "unloaded-")
	createWeb(t, ns, "served", "", 1)
	crtest.WaitCondition(t, k8s, webGVK, ns, "served", "Ready", metav1.ConditionTrue, "", time.Minute)
	if err := k8s.Create(context.Background(), crtest.NewCR(tenantBoxGVK, ns, "box", map[string]any{"policy": "strict"})); err != nil {
		t.Fatal(err)
	}
	u := crtest.WaitCondition(t, k8s, tenantBoxGVK, ns, "box", "Stalled", metav1.ConditionTrue, "ChartInvalid", time.Minute)
	if msg := crtest.Condition(u, "Stalled").Message; !strings.Contains(msg, "has not loaded") || !strings.Contains(msg, "policy") {
		t.Fatalf("the condition does not say why the chart does not load: %s", msg)
	}
	if !strings.Contains(r.logs(), "its kind is unserved until it does") {
		t.Errorf("no log line says the kind is unserved:\n%s", tail(r.logs()))
	}

	// The chart fixed on disk: its CRs are served, by the same process.
	if err := os.Remove(schema); err != nil {
		t.Fatal(err)
	}
	crtest.WaitCondition(t, k8s, tenantBoxGVK, ns, "box", "Ready", metav1.ConditionTrue, "", time.Minute)
	select {
	case <-r.done:
		t.Fatalf("rudder exited:\n%s", tail(r.logs()))
	default:
	}
}
