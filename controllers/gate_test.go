package controllers

import (
	"context"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// TestGateActionSlotsPerNamespace: a namespace holds at most its share of action slots; other
// namespaces are not affected, and a slot given back is taken again.
func TestGateActionSlotsPerNamespace(t *testing.T) {
	g := newGate(4, 2)
	for i := range 2 {
		if !g.startAction("a") {
			t.Fatalf("a namespace did not get its share: slot %d refused", i+1)
		}
	}
	if g.startAction("a") {
		t.Fatal("a namespace got more than its share")
	}
	if !g.startAction("b") {
		t.Fatal("another namespace was held by the first one's actions")
	}
	g.endAction("a")
	if !g.startAction("a") {
		t.Fatal("a slot given back was not taken again")
	}
}

// TestGateWaitingPassGivesItsSlotBack: a pass running past waitingAfter lets the next pass in
// while it still runs; deleting its CR cancels it.
func TestGateWaitingPassGivesItsSlotBack(t *testing.T) {
	g := newGate(1, 1)
	g.waitingAfter = 50 * time.Millisecond
	slow := types.NamespacedName{Namespace: "a", Name: "slow"}
	ctx, leave, err := g.enter(context.Background(), slow)
	if err != nil {
		t.Fatal(err)
	}
	entered := make(chan func())
	go func() {
		_, leaveNext, err := g.enter(context.Background(), types.NamespacedName{Namespace: "b", Name: "next"})
		if err != nil {
			t.Error(err)
		}
		entered <- leaveNext
	}()
	leaveNext := <-entered // only possible once the slow pass gave its slot back
	select {
	case <-ctx.Done():
		t.Fatal("the slow pass was cancelled")
	default:
	}
	g.cancel(slow)
	<-ctx.Done()
	leave()
	leaveNext()
	if len(g.active) != 0 || len(g.running) != 0 {
		t.Fatalf("slots left taken: %d active, %d running", len(g.active), len(g.running))
	}
}
