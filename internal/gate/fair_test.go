package gate

import (
	"strings"
	"testing"
)

// TestFairQueue: items are handed out round robin over their groups, each group's in order;
// a group that comes in while another has many waiting goes after each waiting group once.
func TestFairQueue(t *testing.T) {
	q := NewFairQueue(func(s string) string { g, _, _ := strings.Cut(s, "/"); return g })
	for _, it := range []string{"a/1", "a/2", "a/3", "a/4"} {
		q.Push(it)
	}
	pop := func(n int) string {
		var out []string
		for range n {
			out = append(out, q.Pop())
		}
		return strings.Join(out, " ")
	}
	if got := pop(1); got != "a/1" {
		t.Fatalf("first: %s", got)
	}
	q.Push("b/1")
	q.Push("b/2")
	q.Push("c/1")
	if got, want := pop(q.Len()), "a/2 b/1 c/1 a/3 b/2 a/4"; got != want {
		t.Fatalf("order %q, want %q", got, want)
	}
	if q.Len() != 0 || len(q.ring) != 0 || len(q.groups) != 0 {
		t.Fatalf("not empty: %d items, ring %v, groups %v", q.Len(), q.ring, q.groups)
	}
	// A group alone is FIFO.
	for _, it := range []string{"a/1", "a/2", "a/3"} {
		q.Push(it)
	}
	if got := pop(3); got != "a/1 a/2 a/3" {
		t.Fatalf("alone: %s", got)
	}
}
