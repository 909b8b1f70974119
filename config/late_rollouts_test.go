package config_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	rstatus "github.com/rudder-operator/rudder/api/status"
	"github.com/rudder-operator/rudder/internal/crtest"
	"github.com/rudder-operator/rudder/internal/testcluster"
	"github.com/rudder-operator/rudder/internal/watches"
	"github.com/rudder-operator/rudder/internal/wiring"
)

// TestRolloutKindServedLate (issue 48): on a cluster without rudder's Rollout CRD, a watch
// with a rollout policy used to stop rudder after 30 s ("no matches for kind Rollout"),
// every kind unserved. Now every kind is served at once; a chart edit of the rollout's kind
// waits, its CR saying why; and once the CRD is applied, the rollout moves the CR to the new
// chart, with no restart.
func TestRolloutKindServedLate(t *testing.T) {
	crtest.NeedsCluster(t)
	ctx := context.Background()
	// A control plane of its own: the suite's has the Rollout CRD once config/default is applied.
	c, err := testcluster.Start(ctx, testcluster.Options{CRDDirectoryPaths: []string{
		filepath.Join(root, "controllers/testdata/crds/rolloutprobe.yaml"), filepath.Join(root, "controllers/testdata/crds/tenantbox.yaml")}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Stop() })
	kc, err := client.New(c.Config, client.Options{Scheme: wiring.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for _, ch := range []string{"tenantbox", "rolled"} {
		if err := os.CopyFS(filepath.Join(dir, ch), os.DirFS(filepath.Join(root, "controllers/testdata/charts/tenantbox"))); err != nil {
			t.Fatal(err)
		}
	}
	wf := filepath.Join(dir, "watches.yaml")
	if err := os.WriteFile(wf, []byte(`
- {group: test.rudder.dev, version: v1, kind: TenantBox, chart: tenantbox}
- {group: test.rudder.dev, version: v1, kind: RolloutProbe, chart: rolled, rollout: {waves: [{count: 1}], settle: 1s, healthTimeout: 1m}}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	ws, err := watches.Load(wf)
	if err != nil {
		t.Fatal(err)
	}
	startRudderWith(t, c.Config, ws, wiring.ManagerOptions{ChartReload: true, ChartDebounce: 200 * time.Millisecond, SeveralManagers: true})

	ns := crtest.NewNamespace(t, kc, "late-")
	box := schema.GroupVersionKind{Group: "test.rudder.dev", Version: "v1", Kind: "TenantBox"}
	probe := schema.GroupVersionKind{Group: "test.rudder.dev", Version: "v1", Kind: "RolloutProbe"}
	for gvk, name := range map[schema.GroupVersionKind]string{box: "box", probe: "served"} {
		if err := kc.Create(ctx, crtest.NewCR(gvk, ns, name, map[string]any{})); err != nil {
			t.Fatal(err)
		}
		crtest.WaitCondition(t, kc, gvk, ns, name, "Ready", metav1.ConditionTrue, "", time.Minute)
	}

	editChartVersion(t, filepath.Join(dir, "rolled"))
	u := crtest.WaitCondition(t, kc, probe, ns, "served", rstatus.TypeRollout, metav1.ConditionFalse, rstatus.ReasonRolloutWaiting, time.Minute)
	if msg := crtest.Condition(u, rstatus.TypeRollout).Message; !strings.Contains(msg, "does not serve rudder's Rollout kind") {
		t.Fatalf("the Rollout condition does not say why the chart edit waits: %s", msg)
	}
	if rev, _, _ := unstructured.NestedInt64(u.Object, "status", "release", "revision"); rev != 1 {
		t.Fatalf("the chart edit moved the CR without a rollout: revision %d", rev)
	}

	if out, err := c.Command("kubectl", "apply", "--server-side", "-f", filepath.Join(root, "config/crd/bases/rudder.dev_rollouts.yaml")).CombinedOutput(); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	crtest.Eventually(t, "the rollout moves the CR to the edited chart", 2*time.Minute, func(ctx context.Context) (bool, error) {
		u, err := crtest.Get(ctx, kc, probe, ns, "served")
		if err != nil {
			return false, err
		}
		rev, _, _ := unstructured.NestedInt64(u.Object, "status", "release", "revision")
		r := crtest.Condition(u, "Ready")
		return rev == 2 && r != nil && r.Status == metav1.ConditionTrue && r.ObservedGeneration == u.GetGeneration(), nil
	})
}
