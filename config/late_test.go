package config_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/rudder-operator/rudder/internal/crtest"
	"github.com/rudder-operator/rudder/internal/watches"
	"github.com/rudder-operator/rudder/internal/wiring"
)

// TestWaitsForAWatchedCRD: rudder starts while one of its watched kinds has no CRD (as when
// `kubectl apply -k` creates CRDs and rudder's Deployment together): it serves the other kind
// at once, says it waits (rudder_watch_waiting_for_crd), and serves the late kind as soon as
// its CRD is established, without a restart.
func TestWaitsForAWatchedCRD(t *testing.T) {
	crtest.NeedsCluster(t)
	kubectl(t, "apply", "--server-side", "-f", "config/testdata/crds/widget.yaml")
	waitEstablished(t, "widgets.test.rudder.dev")
	late := schema.GroupVersionKind{Group: "late.rudder.dev", Version: "v1", Kind: "Latecomer"}
	label := map[string]string{"gvk": "Latecomer.late.rudder.dev/v1"}
	dir := t.TempDir()
	wf := filepath.Join(dir, "watches.yaml")
	chart := filepath.Join(root, "config", "testdata", "charts", "widget")
	entries := "- {group: test.rudder.dev, version: v1, kind: Widget, chart: " + chart + "}\n" +
		"- {group: late.rudder.dev, version: v1, kind: Latecomer, chart: " + chart + "}\n"
	if err := os.WriteFile(wf, []byte(entries), 0o644); err != nil {
		t.Fatal(err)
	}
	ws, err := watches.Load(wf)
	if err != nil {
		t.Fatal(err)
	}
	ns := crtest.NewNamespace(t, k8s, "late-")
	startRudderWith(t, cluster.Config, ws, wiring.ManagerOptions{WatchNamespaces: []string{ns}, SeveralManagers: true})

	// The served kind is served; the late one is waited for.
	if err := k8s.Create(t.Context(), crtest.NewCR(widgetGVK, ns, "w", map[string]any{"message": "hi"})); err != nil {
		t.Fatal(err)
	}
	crtest.WaitCondition(t, k8s, widgetGVK, ns, "w", "Ready", metav1.ConditionTrue, "", time.Minute)
	if got := crtest.Metric(t, "rudder_watch_waiting_for_crd", label); got != 1 {
		t.Fatalf("rudder_watch_waiting_for_crd = %v while the CRD is missing, want 1", got)
	}

	// Its CRD appears: its CRs are served, with no restart.
	crd, err := os.ReadFile(filepath.Join(root, "config", "testdata", "crds", "widget.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	lateCRD := strings.NewReplacer("widgets.test.rudder.dev", "latecomers.late.rudder.dev", "test.rudder.dev", "late.rudder.dev",
		"Widget", "Latecomer", "widget", "latecomer").Replace(string(crd))
	cmd := cluster.Command("kubectl", "apply", "--server-side", "-f", "-")
	cmd.Stdin = strings.NewReader(lateCRD)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("applying the late CRD: %v\n%s", err, out)
	}
	t.Cleanup(func() {
		kubectl(t, "delete", "--ignore-not-found", "--wait=false", "crd", "latecomers.late.rudder.dev")
	})
	crtest.Eventually(t, "the late CRD served", time.Minute, func(ctxt context.Context) (bool, error) {
		return k8s.Create(ctxt, crtest.NewCR(late, ns, "l", map[string]any{"message": "late"})) == nil, nil
	})
	crtest.WaitCondition(t, k8s, late, ns, "l", "Ready", metav1.ConditionTrue, "", time.Minute)
	if got := crtest.Metric(t, "rudder_watch_waiting_for_crd", label); got != 0 {
		t.Fatalf("rudder_watch_waiting_for_crd = %v once served, want 0", got)
	}
}
