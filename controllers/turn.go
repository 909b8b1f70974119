package controllers

import (
	"fmt"
	"strings"
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
	if !p.r.gate.startAction(p.key.Namespace) {
		msg := fmt.Sprintf("waiting for a turn: CRs of namespace %s hold all %d of the kind's Helm action slots (limits.maxActionsPerNamespace)",
			p.key.Namespace, p.r.gate.perNamespace)
		o.phase, o.reason, o.message = phaseLocked, ReasonQueued, msg
		o.requeueIn(jitter(turnRequeue))
		return false
	}
	p.acting = true
	return true
}

func (p *pass) endTurn() {
	if p.acting {
		p.acting = false
		p.r.gate.endAction(p.key.Namespace)
	}
}

// rollbackDue returns the rudder.dev/rollback-to value this pass has to act on: set, and
// neither the one status.release.rollbackRequest says was handled nor the one a pass whose
// status write the cache does not show yet handled.
func (p *pass) rollbackDue() (string, bool) {
	v := strings.TrimSpace(p.obj.GetAnnotations()[AnnotationRollbackTo])
	if v == "" || v == p.rollbackRequest() {
		return v, false
	}
	if handled, ok := p.r.shadows.rollbacks.of(p.key, p.obj.GetUID()); ok && handled.value == v {
		return v, false
	}
	return v, true
}
