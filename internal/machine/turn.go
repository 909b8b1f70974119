package machine

import (
	"fmt"

	"k8s.io/apimachinery/pkg/types"

	"github.com/rudder-operator/rudder/internal/gate"
)

// ReasonQueued: the CR's namespace holds every Helm action slot of the kind
// (limits.maxActionsPerNamespace); the CR waits its turn without holding a worker.
const ReasonQueued = "Queued"

// turn is where a pass stands with its namespace's action slots (World.Turns): a pass acts on
// its release only while it holds one.
type turn struct {
	// acting: the pass holds one of its namespace's action slots.
	acting bool
	// queued: the pass found its namespace's action slots taken and waits its turn.
	queued bool
}

// claim takes one of the namespace's action slots for key for the rest of the pass (giveBack
// gives it back); when the namespace's CRs hold them all, the outcome says so and the CR is
// requeued.
func (t *turn) claim(w *World, key types.NamespacedName, o *outcome) bool {
	if t.acting {
		return true
	}
	if !w.Turns.StartAction(key) {
		t.queued = true
		msg := fmt.Sprintf("waiting for a turn: CRs of namespace %s hold all %d of the kind's Helm action slots (limits.maxActionsPerNamespace)",
			key.Namespace, w.Turns.PerNamespace())
		o.phase, o.reason, o.message = phaseLocked, ReasonQueued, msg
		o.requeueIn(Jitter(gate.TurnRequeue))
		return false
	}
	t.acting = true
	return true
}

// giveBack gives back the pass's action slot; a pass that needed none is no longer queued.
func (t *turn) giveBack(w *World, key types.NamespacedName) {
	if !t.queued {
		w.Turns.Dequeue(key)
	}
	if t.acting {
		t.acting = false
		w.Turns.EndAction(key.Namespace)
	}
}
