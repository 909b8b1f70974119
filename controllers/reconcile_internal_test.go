package controllers

import (
	"reflect"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
)

// TestPassCopy: the pass's copy shares status.inventory with the cache's object and nothing
// else, so that what a pass (or a hook) edits of the rest never reaches the cache.
func TestPassCopy(t *testing.T) {
	cached := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "test.rudder.dev/v1", "kind": "Widget",
		"metadata": map[string]any{"name": "w", "labels": map[string]any{"a": "b"}},
		"spec":     map[string]any{"replicas": int64(2)},
		"status": map[string]any{
			"conditions": []any{map[string]any{"type": "Ready", "status": "True"}},
			"inventory": map[string]any{"revision": int64(1), "count": int64(1),
				"entries": []any{map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "name": "w"}}},
		},
	}}
	want := runtime.DeepCopyJSON(cached.Object)
	obj := passCopy(cached)
	if !reflect.DeepEqual(obj.Object, cached.Object) {
		t.Fatalf("the copy differs: %v", obj.Object)
	}
	inv := func(u *unstructured.Unstructured) map[string]any {
		m, _, _ := unstructured.NestedFieldNoCopy(u.Object, "status", "inventory")
		return m.(map[string]any)
	}
	if reflect.ValueOf(inv(obj)).UnsafePointer() != reflect.ValueOf(inv(cached)).UnsafePointer() {
		t.Fatal("status.inventory was copied, not shared")
	}
	obj.SetLabels(map[string]string{"c": "d"})
	_ = unstructured.SetNestedField(obj.Object, int64(3), "spec", "replicas")
	_ = unstructured.SetNestedField(obj.Object, "Running", "status", "phase")
	obj.Object["status"].(map[string]any)["conditions"].([]any)[0].(map[string]any)["status"] = "False"
	if !reflect.DeepEqual(cached.Object, want) {
		t.Fatalf("an edit of the copy reached the cache's object: %v", cached.Object)
	}
}
