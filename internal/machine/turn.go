package machine

import (
	"fmt"
	"strings"

	"github.com/rudder-operator/rudder/internal/gate"
	"github.com/rudder-operator/rudder/internal/records"
)

// ReasonQueued: the CR's namespace holds every Helm action slot of the kind
// (limits.maxActionsPerNamespace); the CR waits its turn without holding a worker.
const ReasonQueued = "Queued"

// takeTurn takes one of the namespace's action slots for the rest of the pass (endTurn gives
// it back); when the namespace's CRs hold them all, the outcome says so and the CR is
// requeued.
func (p *pass) takeTurn(o *outcome) bool {
	if p.acting {
		return true
	}
	if !p.w.Turns.StartAction(p.key) {
		p.queued = true
		msg := fmt.Sprintf("waiting for a turn: CRs of namespace %s hold all %d of the kind's Helm action slots (limits.maxActionsPerNamespace)",
			p.key.Namespace, p.w.Turns.PerNamespace())
		o.phase, o.reason, o.message = phaseLocked, ReasonQueued, msg
		o.requeueIn(Jitter(gate.TurnRequeue))
		return false
	}
	p.acting = true
	return true
}

// endTurn gives back the pass's action slot; a pass that needed none is no longer queued.
func (p *pass) endTurn() {
	if !p.queued {
		p.w.Turns.Dequeue(p.key)
	}
	if p.acting {
		p.acting = false
		p.w.Turns.EndAction(p.key.Namespace)
	}
}

// rollbackDue returns the rudder.dev/rollback-to value this pass has to act on: set, and not
// the last one handled (the release's facts).
func (p *pass) rollbackDue() (string, bool) {
	return p.requestDue(AnnotationRollbackTo, p.facts().RollbackTo)
}

// requestDue returns the value of an annotation that asks for something once per value
// (rollback-to, reconcile-at, reset-at) and whether this pass acts on it: set, and not the
// value handled, as the release's facts hash it (records.HandledValue).
func (p *pass) requestDue(annotation, handled string) (string, bool) {
	v := strings.TrimSpace(p.obj.GetAnnotations()[annotation])
	return v, v != "" && records.HandledValue(v) != handled
}
