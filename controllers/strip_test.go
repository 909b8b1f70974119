package controllers

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"
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

// The CR cache does not keep kubectl's copy of the applied CR.
func TestStripCR(t *testing.T) {
	t.Parallel()
	u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "x/v1", "kind": "Web",
		"metadata": map[string]any{"name": "w", "annotations": map[string]any{
			corev1.LastAppliedConfigAnnotation: `{"spec":{}}`, "rudder.dev/paused": "true"}},
		"spec": map[string]any{"replicas": int64(1)}}}
	if _, err := stripCR(u); err != nil {
		t.Fatal(err)
	}
	if ann := u.GetAnnotations(); len(ann) != 1 || ann["rudder.dev/paused"] != "true" || u.Object["spec"] == nil {
		t.Errorf("kept %v", u.Object)
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

// The operand cache keeps metadata (without managedFields and owner references), kstatus's
// verdict on the whole object, and the status only when hooks read it; it drops specs, pod
// templates and payloads. A second application keeps the first verdict.
func TestOperandTransform(t *testing.T) {
	t.Parallel()
	deployment := func() *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "apps/v1", "kind": "Deployment",
			"metadata": map[string]any{"name": "d", "generation": int64(3), "labels": map[string]any{"a": "b"},
				"managedFields":   []any{map[string]any{"manager": "x"}},
				"ownerReferences": []any{map[string]any{"kind": "Web", "name": "d"}}},
			"spec": map[string]any{"replicas": int64(2), "template": map[string]any{"spec": map[string]any{"containers": []any{}}}},
			"status": map[string]any{"observedGeneration": int64(3), "replicas": int64(2), "updatedReplicas": int64(2),
				"readyReplicas": int64(2), "availableReplicas": int64(1)},
		}}
	}
	for _, keep := range []bool{false, true} {
		dep := deployment()
		if _, err := operandTransform(keep)(dep); err != nil {
			t.Fatal(err)
		}
		verdict, msg, err := operandStatus(dep)
		if err != nil || verdict != status.InProgressStatus || !strings.Contains(msg, "Available: 1/2") {
			t.Errorf("keep status %v: verdict %q %q %v", keep, verdict, msg, err)
		}
		if _, found := dep.Object["spec"]; found {
			t.Errorf("keep status %v: spec kept", keep)
		}
		if _, found := dep.Object["status"]; found != keep {
			t.Errorf("keep status %v: status kept %v", keep, found)
		}
		if dep.GetGeneration() != 3 || dep.GetLabels()["a"] != "b" || len(dep.GetManagedFields()) != 0 || len(dep.GetOwnerReferences()) != 0 {
			t.Errorf("keep status %v: metadata %v", keep, dep.Object["metadata"])
		}
		// Applied again (the object is already transformed): the verdict is not recomputed
		// from what is left.
		if _, err := operandTransform(keep)(dep); err != nil {
			t.Fatal(err)
		}
		if verdict, _, _ := operandStatus(dep); verdict != status.InProgressStatus {
			t.Errorf("keep status %v: second application changed the verdict to %q", keep, verdict)
		}
	}

	cm := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": "c"}, "data": map[string]any{"k": "v"}}}
	if _, err := operandTransform(false)(cm); err != nil {
		t.Fatal(err)
	}
	if _, found := cm.Object["data"]; found {
		t.Error("ConfigMap data kept")
	}
	if verdict, _, err := operandStatus(cm); verdict != status.CurrentStatus || err != nil {
		t.Errorf("ConfigMap verdict %q %v", verdict, err)
	}

	// A status kstatus cannot read fails the pass that reads it, with kstatus's error.
	bad := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "apps/v1", "kind": "Deployment",
		"metadata": map[string]any{"name": "b", "generation": int64(1)}, "status": map[string]any{"conditions": "not a list"}}}
	if _, err := operandTransform(false)(bad); err != nil {
		t.Fatal(err)
	}
	if _, _, err := operandStatus(bad); err == nil {
		t.Error("a malformed status gave a verdict")
	}

	// An object read from the API server (no dependent watch) gets its verdict computed.
	if verdict, _, err := operandStatus(deployment()); verdict != status.InProgressStatus || err != nil {
		t.Errorf("uncached verdict %q %v", verdict, err)
	}
}
