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
