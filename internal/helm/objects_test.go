package helm

import (
	"context"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
)

// Drift re-apply: a deleted object is recreated, a field the manifest sets is reverted, a field
// someone else added stays, and an object as the manifest says is not written.
func TestReapply(t *testing.T) {
	ctx := context.Background()
	manifest := func(name, msg string) *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
			"metadata": map[string]any{"name": name, "namespace": "ns"}, "data": map[string]any{"message": msg}}}
		return u
	}
	c := fake.NewClientBuilder().WithScheme(scheme.Scheme).WithObjects(
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "edited", Namespace: "ns"},
			Data: map[string]string{"message": "tampered", "extra": "someone else's"}},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "same", Namespace: "ns"}, Data: map[string]string{"message": "m"}},
	).Build()
	same := &corev1.ConfigMap{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: "ns", Name: "same"}, same); err != nil {
		t.Fatal(err)
	}

	restored, err := Reapply(ctx, []*unstructured.Unstructured{manifest("gone", "g"), manifest("edited", "e"), manifest("same", "m")}, c, c)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"ConfigMap/ns/gone (recreated)", "ConfigMap/ns/edited (reverted)"}; !slices.Equal(restored, want) {
		t.Errorf("restored %q, want %q", restored, want)
	}
	var cm corev1.ConfigMap
	if err := c.Get(ctx, client.ObjectKey{Namespace: "ns", Name: "gone"}, &cm); err != nil || cm.Data["message"] != "g" {
		t.Errorf("recreated: %v %v", err, cm.Data)
	}
	if err := c.Get(ctx, client.ObjectKey{Namespace: "ns", Name: "edited"}, &cm); err != nil ||
		cm.Data["message"] != "e" || cm.Data["extra"] != "someone else's" {
		t.Errorf("reverted: %v %v", err, cm.Data)
	}
	if err := c.Get(ctx, client.ObjectKey{Namespace: "ns", Name: "same"}, &cm); err != nil || cm.ResourceVersion != same.ResourceVersion {
		t.Errorf("an unchanged object was written: %v, resourceVersion %s → %s", err, same.ResourceVersion, cm.ResourceVersion)
	}
}

// MemoMapper asks its mapper once per kind and version found, and every time for one that is
// not (yet) there.
func TestMemoMapper(t *testing.T) {
	t.Parallel()
	inner := &countingMapper{RESTMapper: testMapper()}
	m := MemoMapper(inner)
	gk := schema.GroupKind{Kind: "ConfigMap"}
	for range 3 {
		rm, err := m.RESTMapping(gk, "v1")
		if err != nil || rm.Resource.Resource != "configmaps" || rm.Scope.Name() != meta.RESTScopeNameNamespace {
			t.Fatalf("mapping %+v, %v", rm, err)
		}
		rm.Resource.Resource = "changed by a caller"
	}
	if inner.calls != 1 {
		t.Errorf("asked its mapper %d times for one kind", inner.calls)
	}
	missing := schema.GroupKind{Group: "example.com", Kind: "NotYet"}
	for range 2 {
		if _, err := m.RESTMapping(missing, "v1"); !meta.IsNoMatchError(err) {
			t.Fatalf("missing kind: %v", err)
		}
	}
	if inner.calls != 3 {
		t.Errorf("a missing kind was remembered: %d calls", inner.calls)
	}
}

type countingMapper struct {
	meta.RESTMapper
	calls int
}

func (c *countingMapper) RESTMapping(gk schema.GroupKind, versions ...string) (*meta.RESTMapping, error) {
	c.calls++
	return c.RESTMapper.RESTMapping(gk, versions...)
}
