package controllers

import (
	"slices"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
)

// A status and finalizers this process wrote are read in place of the cache's older view of
// its CR, until the cache shows that version or a newer one, for that incarnation of the CR
// alone, and for a minute at most.
func TestStatusesReadUntilTheCacheShowsTheWrite(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC))
	s := newStatuses(clk)
	key := types.NamespacedName{Namespace: "ns", Name: "w"}
	cached := func(rv string, uid types.UID) *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: map[string]any{"status": map[string]any{"observedGeneration": int64(1)}}}
		u.SetNamespace("ns")
		u.SetName("w")
		u.SetUID(uid)
		u.SetResourceVersion(rv)
		return u
	}
	written := map[string]any{"observedGeneration": int32(2)} // a hook's value of any type
	finalizers := []string{"other", Finalizer}
	s.wrote(key, "u1", "10", written, finalizers)
	written["observedGeneration"] = int32(3) // the kept status and finalizers are copies
	finalizers[1] = "changed"

	reads := func(u *unstructured.Unstructured) bool {
		_, ok := s.read(u)
		return ok
	}
	u := cached("9", "u1")
	kept, ok := s.read(u)
	if !ok {
		t.Fatal("a cache behind the write was read as it is")
	}
	if !equality.Semantic.DeepEqual(kept, u.Object["status"]) {
		t.Fatalf("read returned %v, and put %v", kept, u.Object["status"])
	}
	if got, _, _ := unstructured.NestedInt64(u.Object, "status", "observedGeneration"); got != 2 {
		t.Fatalf("observedGeneration %d read, want the written 2", got)
	}
	if got := u.GetFinalizers(); !slices.Equal(got, []string{"other", Finalizer}) {
		t.Fatalf("finalizers %q read, want the written ones", got)
	}
	if reads(cached("9", "u2")) {
		t.Fatal("a CR made anew read its predecessor's status")
	}

	s.wrote(key, "u1", "10", written, nil)
	if reads(cached("10", "u1")) || reads(cached("9", "u1")) {
		t.Fatal("the write was read after the cache showed it")
	}

	s.wrote(key, "u1", "12", written, nil)
	clk.Step(statusesTTL + time.Second)
	if reads(cached("11", "u1")) {
		t.Fatal("a write the cache did not catch up with in a minute was still read")
	}

	s.wrote(key, "u1", "14", written, nil)
	s.forget(key)
	if reads(cached("13", "u1")) {
		t.Fatal("a forgotten write was read")
	}
}
