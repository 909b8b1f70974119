package controllers

import (
	"testing"

	"k8s.io/apimachinery/pkg/types"
)

// TestShadow: a value is seen by the CR it was written for, not by a CR of the same name made
// anew, and not once forgotten.
func TestShadow(t *testing.T) {
	s := newShadow[string]()
	key := types.NamespacedName{Namespace: "ns", Name: "w"}
	if _, ok := s.of(key, "u1"); ok {
		t.Fatal("a value before any was kept")
	}
	s.remember(key, "u1", "3")
	if v, ok := s.of(key, "u1"); !ok || v != "3" {
		t.Fatalf("of = %q, %v; want 3", v, ok)
	}
	if _, ok := s.of(key, "u2"); ok {
		t.Fatal("a CR made anew saw its predecessor's value")
	}
	s.forget(key)
	if _, ok := s.of(key, "u1"); ok {
		t.Fatal("a forgotten value was seen")
	}
}
