package machine

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/rudder-operator/rudder/internal/helm"
	"github.com/rudder-operator/rudder/internal/plan"
	"github.com/rudder-operator/rudder/internal/records"
	"github.com/rudder-operator/rudder/internal/release"
)

// The pass decides in two pure steps: records.DetermineState classifies the release's newest
// revision against what the CR wants, and plan.Next maps that state, with the few facts of a
// situation, to the one action to take now, or to how the pass ends. The pass runs the action,
// observes the release as the action left it, and asks again: an install that failed is
// followed by the removal of what it left, an upgrade that failed by a rollback, an unlock by
// the upgrade it unblocks. An action is taken at most once per pass, so every pass ends.

// ForeignPendingGrace is how long a pending revision that rudder did not start is left to the
// operation that may still be running it (a person's helm rollback or upgrade, whose --timeout
// defaults to this) before rudder unlocks it as dead. rudder's own pending revisions are
// unlocked at once: rudder runs one operation per release, so one it finds was started by a
// process that is gone.
const ForeignPendingGrace = 5 * time.Minute

// situation is what plan.Next decides from, for the release as obs has it; in StateFailed it
// reads the deployed revision before the failed one.
func (ob *observation) situation(ctx context.Context, obs observed, o *outcome) (plan.Situation, error) {
	s := plan.Situation{State: obs.state, Held: ob.held != nil, RollsBack: ob.w.Watch.Policies().RollsBack(),
		Failed: o.failed(), Taken: o.taken}
	if v, due := ob.rollbackDue(); due {
		s.RollbackTo = v
	}
	// A new reconcile-at or reset-at value tries the held-back pair once more, and so does
	// a retry that is due.
	held, ok := ob.heldBackFailure()
	s.HeldBack = ok && !o.nudged && !ob.retryDue(held)
	f := o.recordedFailure()
	if f == nil && s.HeldBack {
		f = held
	}
	s.Retries = ob.retriesLeft(f)
	if h := obs.head; h != nil {
		s.Revision, s.OlderDeployed, s.Kept, s.Unkept = h.Revision, len(h.OlderDeployed) > 0, h.Kept(), h.Unkept()
		s.TestDue = ob.w.Watch.Policies().Tests() && obs.state == records.StateInSync && h.MadeByRudder() && h.Tested() == ""
	}
	s.TestRollsBack, s.Made = ob.w.Watch.Policies().TestRollsBack(), o.madeStep() != nil
	s.Relabel = obs.rel != nil && ob.needsAdoption(obs.rel)
	if obs.state == records.StateConflict && obs.head != nil && obs.head.OwnerUID == "" && !s.Deleting {
		p, err := ob.proveForeign(ctx)
		if err != nil {
			return s, err
		}
		s.Adoptable = p.Why == ""
	}
	if h := obs.head; ob.pin.back > 0 && h != nil && h.ChartDigest == ob.want.ChartDigest && h.Status == release.StatusDeployed &&
		!o.taken[plan.RolloutRollback] {
		s.RolloutBack = ob.pin.back
	}
	switch {
	case obs.state == records.StateLocked:
		s.Foreign = ob.foreign(obs.rel)
	case obs.state == records.StateFailed || (s.Failed == plan.Test && s.TestRollsBack):
		if o.taken[plan.Install] || s.Kept || (s.Failed == plan.Upgrade && !s.RollsBack) {
			// Nothing was deployed before a first install (rudder keeps the record of a
			// failed one only when nothing was); nothing is rolled back to.
			break
		}
		deployed, err := ob.w.Helm.LastDeployed(ctx, ob.scope, ob.relName, obs.head.Revision)
		if err != nil {
			return s, fmt.Errorf("reading release %s: %w", ob.relName, err)
		}
		if deployed != nil {
			s.Deployed = deployed.Version
		}
	}
	return s, nil
}

// retriesLeft reports whether the failure f (nil: none) is tried again.
func (ob *observation) retriesLeft(f *failure) bool {
	return retriesLeft(f, ob.w.Watch.Policies().Retries())
}

// retryIn is how long until the retry of f is due (≤ 0: due).
func (ob *observation) retryIn(f *failure) time.Duration {
	if f.failed.LastFailure == nil {
		return 0
	}
	return f.failed.LastFailure.Add(retryBackoff(failures(f))).Sub(ob.w.Clock.Now())
}

// retryDue reports whether the held-back failure f of an earlier pass is retried now.
func (ob *observation) retryDue(f *failure) bool { return ob.retriesLeft(f) && ob.retryIn(f) <= 0 }

// foreign reports whether the pending newest revision belongs to an operation rudder did not
// start that may still be running.
func (ob *observation) foreign(rel *release.Release) bool {
	if h := records.HeadOf(rel); rel == nil || h.MadeByRudder() || h.RudderRollback() {
		// rudder's own: an install or upgrade carries LabelRevision, a rollback
		// LabelRollbackRevision, each with its own number.
		return false
	}
	return ob.w.Clock.Since(rel.LastDeployed) < ForeignPendingGrace
}

// needsAdoption reports whether the CR's release carries other shard labels than the CR.
func (ob *observation) needsAdoption(rel *release.Release) bool {
	keys := ob.w.Carried
	return len(keys) > 0 && rel.Labels[records.LabelOwnerUID] == ob.want.OwnerUID && !helm.CarriedMatch(keys, ob.carried(), rel.Labels)
}

// proveForeign reads, once per pass, whether the release of the CR's name that rudder did not
// make proves it is the CR's (helm.Client.ProveForeign).
func (ob *observation) proveForeign(ctx context.Context) (*helm.Proof, error) {
	if ob.proof == nil {
		p, err := ob.w.Helm.ProveForeign(ctx, ob.scope, ob.relName)
		if err != nil {
			return nil, fmt.Errorf("reading release %s, which rudder did not make, and its objects: %w", ob.relName, err)
		}
		ob.proof = p
	}
	return ob.proof, nil
}

// rollbackDue returns the rudder.dev/rollback-to value this pass has to act on: set, and not
// the last one handled (the release's facts).
func (ob *observation) rollbackDue() (string, bool) {
	return ob.requestDue(AnnotationRollbackTo, ob.facts().RollbackTo)
}

// requestDue returns the value of an annotation that asks for something once per value
// (rollback-to, reconcile-at, reset-at) and whether this pass acts on it: set, and not the
// value handled, as the release's facts hash it (records.HandledValue).
func (ob *observation) requestDue(annotation, handled string) (string, bool) {
	v := strings.TrimSpace(ob.obj.GetAnnotations()[annotation])
	return v, v != "" && records.HandledValue(v) != handled
}
