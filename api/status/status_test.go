package status

import (
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
)

// ConditionsOf reads what the reflection-based converter would, and skips what does not parse.
func TestConditionsOfMatchesTheConverter(t *testing.T) {
	want := []metav1.Condition{
		{Type: TypeReady, Status: metav1.ConditionTrue, Reason: ReasonObjectsReady, Message: "revision 2: 2 objects ready",
			ObservedGeneration: 3, LastTransitionTime: metav1.NewTime(time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC))},
		{Type: TypeStalled, Status: metav1.ConditionFalse, Reason: ReasonUpToDate},
	}
	st, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&Common{Conditions: want})
	if err != nil {
		t.Fatal(err)
	}
	list := st["conditions"].([]any)
	list = append(list, "not a map", map[string]any{"status": "True"}, map[string]any{"type": "Bad", "lastTransitionTime": "yesterday"})
	st["conditions"] = list
	u := &unstructured.Unstructured{Object: map[string]any{"status": st}}
	got := ConditionsOf(u)
	var viaConverter Common
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(map[string]any{"conditions": list[:2]}, &viaConverter); err != nil {
		t.Fatal(err)
	}
	if !equality.Semantic.DeepEqual(got, viaConverter.Conditions) || len(got) != 2 {
		t.Fatalf("got %+v\nwant %+v", got, viaConverter.Conditions)
	}
	if ConditionsOf(&unstructured.Unstructured{Object: map[string]any{}}) != nil {
		t.Error("conditions of a CR without status")
	}
}

// InventoryOf reads what the converter would, from what the API server stores (int64 and
// float64 numbers alike), and nothing for a CR without one.
func TestInventoryOfMatchesTheConverter(t *testing.T) {
	want := &Inventory{Revision: 4, Count: 3, Truncated: true, Entries: []InventoryEntry{
		{APIVersion: "v1", Kind: "ConfigMap", Namespace: "demo", Name: "web"},
		{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRole", Name: "web"},
	}}
	st, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&Common{Inventory: want})
	if err != nil {
		t.Fatal(err)
	}
	u := &unstructured.Unstructured{Object: map[string]any{"status": st}}
	if got := InventoryOf(u); !equality.Semantic.DeepEqual(got, want) {
		t.Fatalf("got %+v\nwant %+v", got, want)
	}
	st["inventory"].(map[string]any)["revision"] = float64(4) // as encoding/json decodes it
	if got := InventoryOf(u); got.Revision != 4 {
		t.Fatalf("revision %d from a float64, want 4", got.Revision)
	}
	if InventoryOf(&unstructured.Unstructured{Object: map[string]any{"status": map[string]any{}}}) != nil {
		t.Error("an inventory of a CR without one")
	}
}
