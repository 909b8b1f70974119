package controllers_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	rstatus "github.com/rudder-operator/rudder/api/status"
	"github.com/rudder-operator/rudder/internal/crtest"
)

// status.inventory (issue 70): the objects of the deployed revision, on the day2 chart (a
// ConfigMap, a Deployment and, asked for, a StatefulSet).

var (
	day2CLIGVK   = schema.GroupVersionKind{Group: "test.rudder.dev", Version: "v1", Kind: "Day2CLI"}
	oldSchemaGVK = schema.GroupVersionKind{Group: "test.rudder.dev", Version: "v1", Kind: "OldSchema"}
)

// inventoryLines is u's status.inventory as "revision count truncated" and one
// "apiVersion kind namespace/name" per entry, sorted.
func inventoryLines(t *testing.T, u *unstructured.Unstructured) (string, []string) {
	t.Helper()
	inv := rstatus.InventoryOf(u)
	if inv == nil {
		t.Fatalf("%s/%s has no status.inventory: %v", u.GetNamespace(), u.GetName(), u.Object["status"])
	}
	var lines []string
	for _, e := range inv.Entries {
		lines = append(lines, fmt.Sprintf("%s %s %s/%s", e.APIVersion, e.Kind, e.Namespace, e.Name))
	}
	slices.Sort(lines)
	return fmt.Sprintf("revision %d count %d truncated %t", inv.Revision, inv.Count, inv.Truncated), lines
}

// waitReadyOn waits until the CR is Ready on its generation with its release at revision rev.
func waitReadyOn(t *testing.T, gvk schema.GroupVersionKind, ns, name string, rev int64) *unstructured.Unstructured {
	t.Helper()
	var u *unstructured.Unstructured
	crtest.Eventually(t, fmt.Sprintf("%s %s/%s Ready on revision %d", gvk.Kind, ns, name, rev), timeout, func(ctx context.Context) (bool, error) {
		var err error
		if u, err = crtest.Get(ctx, k8s, gvk, ns, name); err != nil {
			return false, err
		}
		got, _, _ := unstructured.NestedInt64(u.Object, "status", "release", "revision")
		c := crtest.Condition(u, rstatus.TypeReady)
		if c == nil || c.Status != metav1.ConditionTrue || c.ObservedGeneration != u.GetGeneration() || got != rev {
			return false, fmt.Errorf("revision %d, Ready %v", got, c)
		}
		return true, nil
	})
	return u
}

// TestInventoryFollowsTheDeployedRevision: the inventory lists the three objects of revision
// 1, and after an upgrade that drops the StatefulSet the two of revision 2.
func TestInventoryFollowsTheDeployedRevision(t *testing.T) {
	crtest.NeedsCluster(t)
	t.Parallel()
	ns := crtest.NewNamespace(t, k8s, "inventory-")
	create(t, crtest.NewCR(day2CLIGVK, ns, "db", map[string]any{"statefulSet": true}))
	u := waitReadyOn(t, day2CLIGVK, ns, "db", 1)
	head, lines := inventoryLines(t, u)
	want := []string{"apps/v1 Deployment " + ns + "/db", "apps/v1 StatefulSet " + ns + "/db", "v1 ConfigMap " + ns + "/db"}
	if head != "revision 1 count 3 truncated false" || !slices.Equal(lines, want) {
		t.Fatalf("inventory of revision 1: %s\n%s\nwant the ConfigMap, the Deployment and the StatefulSet:\n%s",
			head, strings.Join(lines, "\n"), strings.Join(want, "\n"))
	}

	crtest.Update(t, k8s, day2CLIGVK, ns, "db", func(u *unstructured.Unstructured) { u.Object["spec"] = map[string]any{"statefulSet": false} })
	u = waitReadyOn(t, day2CLIGVK, ns, "db", 2)
	head, lines = inventoryLines(t, u)
	if head != "revision 2 count 2 truncated false" || !slices.Equal(lines, slices.Delete(want, 1, 2)) {
		t.Fatalf("inventory of revision 2 (no StatefulSet): %s\n%s", head, strings.Join(lines, "\n"))
	}
}

// TestInventoryOnAnOldSchema: a kind whose CRD prunes status.inventory (made before rudder wrote
// it) is served as before, and its idle passes write nothing, although every pass computes an
// inventory the API server would drop (counted).
func TestInventoryOnAnOldSchema(t *testing.T) {
	crtest.NeedsCluster(t)
	t.Parallel()
	ns := crtest.NewNamespace(t, k8s, "old-schema-")
	create(t, crtest.NewCR(oldSchemaGVK, ns, "w", map[string]any{"message": "x"}))
	crtest.WaitCondition(t, k8s, oldSchemaGVK, ns, "w", rstatus.TypeReady, metav1.ConditionTrue, "", timeout)
	passes.Passes(t, k8s, oldSchemaGVK, ns, "w", 1)
	u := crtest.MustGet(t, k8s, oldSchemaGVK, ns, "w")
	if _, has, _ := unstructured.NestedFieldNoCopy(u.Object, "status", "inventory"); has {
		t.Fatalf("the schema has no status.inventory, yet it is there: %v", u.Object["status"])
	}
	if rev, _, _ := unstructured.NestedInt64(u.Object, "status", "release", "revision"); rev != 1 {
		t.Fatalf("status.release.revision %d, want 1", rev)
	}
	label := map[string]string{"gvk": "OldSchema.test.rudder.dev/v1"}
	before := crtest.Metric(t, "rudder_status_writes_total", label)
	passes.Passes(t, k8s, oldSchemaGVK, ns, "w", 5)
	if after := crtest.Metric(t, "rudder_status_writes_total", label); after != before {
		t.Fatalf("%v status writes in 5 idle passes of a kind whose schema prunes the inventory, want 0", after-before)
	}
	// rudder tree reads such a CR's objects from its release's manifest instead.
	out := rudderOK(t, "tree", "oldschema", "w", "-n", ns).stdout
	want := "OldSchema/w (Ready: True, revision 1)\n├── ConfigMap/w  Current\n└── Deployment/w  Current\n"
	if out != want {
		t.Fatalf("tree of a CR without an inventory:\n%s\nwant:\n%s", out, want)
	}
}
