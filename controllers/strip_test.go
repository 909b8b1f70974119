package controllers

import (
	"k8s.io/apimachinery/pkg/labels"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func TestStripManagedFields(t *testing.T) {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": "a", "managedFields": []any{map[string]any{"manager": "x"}}, "labels": map[string]any{"k": "v"}},
		"data":     map[string]any{"k": "v"},
	}}
	if _, err := stripManagedFields(u); err != nil {
		t.Fatal(err)
	}
	if _, found, _ := unstructured.NestedFieldNoCopy(u.Object, "metadata", "managedFields"); found {
		t.Error("unstructured: managedFields kept")
	}
	if u.GetName() != "a" || u.GetLabels()["k"] != "v" || u.Object["data"] == nil {
		t.Errorf("unstructured: more than managedFields removed: %v", u.Object)
	}

	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "b", ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "x"}}}}
	if _, err := stripManagedFields(cm); err != nil {
		t.Fatal(err)
	}
	if cm.ManagedFields != nil || cm.Name != "b" {
		t.Errorf("typed: %+v", cm.ObjectMeta)
	}
	// Anything else (a tombstone, say) passes through untouched.
	if out, err := stripManagedFields("x"); err != nil || out != "x" {
		t.Errorf("other: %v %v", out, err)
	}
}

// Each shard elects its own leader: the Lease name is derived from the selector.
func TestLeaderElectionIDPerShard(t *testing.T) {
	t.Parallel()
	parse := func(s string) labels.Selector {
		sel, err := labels.Parse(s)
		if err != nil {
			t.Fatal(err)
		}
		return sel
	}
	if got := LeaderElectionID(parse("")); got != "rudder.rudder.dev" {
		t.Errorf("unsharded: %s", got)
	}
	a, rest := LeaderElectionID(parse("rudder.dev/shard=a")), LeaderElectionID(parse("rudder.dev/shard!=a"))
	if a == rest || a == "rudder.rudder.dev" || a != LeaderElectionID(parse(" rudder.dev/shard = a ")) {
		t.Errorf("shard IDs: a %s, rest %s", a, rest)
	}
	if keys := selectorKeys(parse("b=1,a in (x,y),!c,a!=z")); strings.Join(keys, ",") != "a,b,c" {
		t.Errorf("selector keys: %v", keys)
	}
}

// The operand cache keeps what kstatus and change detection read, not pod templates or
// configuration payloads.
func TestStripOperand(t *testing.T) {
	t.Parallel()
	dep := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apps/v1", "kind": "Deployment",
		"metadata": map[string]any{"name": "d", "generation": int64(3), "managedFields": []any{map[string]any{"manager": "x"}}},
		"spec":     map[string]any{"replicas": int64(2), "template": map[string]any{"spec": map[string]any{"containers": []any{}}}},
		"status":   map[string]any{"observedGeneration": int64(3), "availableReplicas": int64(2)},
	}}
	if _, err := stripOperand(dep); err != nil {
		t.Fatal(err)
	}
	if _, found, _ := unstructured.NestedFieldNoCopy(dep.Object, "spec", "template"); found {
		t.Error("pod template kept")
	}
	if r, _, _ := unstructured.NestedInt64(dep.Object, "spec", "replicas"); r != 2 || dep.GetGeneration() != 3 || dep.Object["status"] == nil {
		t.Errorf("more than the bulk removed: %v", dep.Object)
	}
	if len(dep.GetManagedFields()) != 0 {
		t.Error("managedFields kept")
	}
	cm := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": "c"}, "data": map[string]any{"k": "v"}}}
	if _, err := stripOperand(cm); err != nil {
		t.Fatal(err)
	}
	if _, found := cm.Object["data"]; found {
		t.Error("ConfigMap data kept")
	}
}
