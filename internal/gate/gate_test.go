package gate

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"k8s.io/apimachinery/pkg/types"
)

// TestGateActionSlotsPerNamespace: a namespace holds at most its share of action slots; other
// namespaces are not affected, and a slot given back is taken again.
func TestGateActionSlotsPerNamespace(t *testing.T) {
	g := New("test", 4, 2)
	in := func(ns, name string) types.NamespacedName { return types.NamespacedName{Namespace: ns, Name: name} }
	for i := range 2 {
		if !g.StartAction(in("a", fmt.Sprint(i))) {
			t.Fatalf("a namespace did not get its share: slot %d refused", i+1)
		}
	}
	if g.StartAction(in("a", "late")) || g.StartAction(in("a", "later")) {
		t.Fatal("a namespace got more than its share")
	}
	if got := testutil.ToFloat64(actionsQueued.WithLabelValues("test", "a")); got != 2 {
		t.Fatalf("rudder_actions_queued{namespace=a} is %v, want 2", got)
	}
	if !g.StartAction(in("b", "0")) {
		t.Fatal("another namespace was held by the first one's actions")
	}
	g.EndAction("a")
	if !g.StartAction(in("a", "late")) {
		t.Fatal("a slot given back was not taken again")
	}
	g.Dequeue(in("a", "later")) // its next pass needed no action
	if n := testutil.CollectAndCount(actionsQueued); n != 0 {
		t.Fatalf("rudder_actions_queued has %d series once nothing waits, want none", n)
	}
}

// TestGateWaitingPassGivesItsSlotBack: a pass running past waitingAfter lets the next pass in
// while it still runs; deleting its CR cancels it.
func TestGateWaitingPassGivesItsSlotBack(t *testing.T) {
	g := New("test", 1, 1)
	g.waitingAfter = 50 * time.Millisecond
	slow := types.NamespacedName{Namespace: "a", Name: "slow"}
	ctx, leave, err := g.Enter(context.Background(), slow)
	if err != nil {
		t.Fatal(err)
	}
	entered := make(chan func())
	go func() {
		_, leaveNext, err := g.Enter(context.Background(), types.NamespacedName{Namespace: "b", Name: "next"})
		if err != nil {
			t.Error(err)
		}
		entered <- leaveNext
	}()
	var leaveNext func()
	select {
	case leaveNext = <-entered: // only possible once the slow pass gave its slot back
	case <-time.After(10 * time.Second):
		t.Fatal("timed out waiting for the next pass to enter: the slow pass kept its slot past waitingAfter")
	}
	select {
	case <-ctx.Done():
		t.Fatal("the slow pass was cancelled")
	default:
	}
	g.Cancel(slow)
	select {
	case <-ctx.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("timed out waiting for cancel to end the slow pass's context")
	}
	leave()
	leaveNext()
	if g.active.taken() != 0 || len(g.running) != 0 {
		t.Fatalf("slots left taken: %d active, %d running", g.active.taken(), len(g.running))
	}
}
