package gate

import (
	"context"
	"runtime"
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

// TestSlotsAreHandedOutFairly: with the one slot held and four passes of namespace a waiting
// for it, a pass of namespace b that comes after them gets it second, not fifth; a pass whose
// context ends while it waits is skipped, and every slot comes back.
func TestSlotsAreHandedOutFairly(t *testing.T) {
	s := newSlots(1)
	if err := s.acquire(t.Context(), "a"); err != nil {
		t.Fatal(err)
	}
	order, stopped := make(chan string, 8), make(chan string, 1)
	wait := func(ctx context.Context, name string) {
		n := s.waitingLen()
		go func() {
			if s.acquire(ctx, name[:1]) == nil {
				order <- name
			} else {
				stopped <- name
			}
		}()
		for s.waitingLen() == n { // registered before the next one comes
			runtime.Gosched()
		}
	}
	gone, cancel := context.WithCancel(t.Context())
	for _, n := range []string{"a1", "a2", "a3"} {
		wait(t.Context(), n)
	}
	wait(gone, "a4")
	wait(t.Context(), "b1")
	cancel()
	if n := <-stopped; n != "a4" {
		t.Fatalf("%s stopped waiting", n)
	}
	var got []string
	for range 4 {
		s.release() // the holder's, then each pass's in turn
		got = append(got, <-order)
	}
	if strings.Join(got, " ") != "a1 b1 a2 a3" {
		t.Fatalf("handed out in the order %v, want b1 second and a4, gone, skipped", got)
	}
	s.release()
	if s.taken() != 0 || s.waitingLen() != 0 {
		t.Fatalf("%d slots still taken, %d waiting", s.taken(), s.waitingLen())
	}
}
