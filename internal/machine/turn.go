package machine

import (
	"fmt"

	"github.com/rudder-operator/rudder/internal/gate"
)

// ReasonQueued: the CR's namespace holds every Helm action slot of the kind
// (limits.maxActionsPerNamespace); the CR waits its turn without holding a worker.
const ReasonQueued = "Queued"

// takeTurn takes one of the namespace's action slots for the rest of the pass (endTurn gives
// it back); when the namespace's CRs hold them all, the outcome says so and the CR is
// requeued.
func (ac *actor) takeTurn(o *outcome) bool {
	if ac.acting {
		return true
	}
	if !ac.w.Turns.StartAction(ac.key) {
		ac.queued = true
		msg := fmt.Sprintf("waiting for a turn: CRs of namespace %s hold all %d of the kind's Helm action slots (limits.maxActionsPerNamespace)",
			ac.key.Namespace, ac.w.Turns.PerNamespace())
		o.phase, o.reason, o.message = phaseLocked, ReasonQueued, msg
		o.requeueIn(Jitter(gate.TurnRequeue))
		return false
	}
	ac.acting = true
	return true
}

// endTurn gives back the pass's action slot; a pass that needed none is no longer queued.
func (ac *actor) endTurn() {
	if !ac.queued {
		ac.w.Turns.Dequeue(ac.key)
	}
	if ac.acting {
		ac.acting = false
		ac.w.Turns.EndAction(ac.key.Namespace)
	}
}
