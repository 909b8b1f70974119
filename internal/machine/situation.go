package machine

import (
	"context"
	"fmt"

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

// situation is what plan.Next decides from, for the release as obs has it; in StateFailed it
// reads the deployed revision before the failed one.
func (p *pass) situation(ctx context.Context, obs observed, o *outcome) (plan.Situation, error) {
	s := plan.Situation{State: obs.state, Held: p.held != nil, RollsBack: p.w.Watch.RollsBack(),
		Failed: o.failed(), Taken: o.taken}
	if v, due := p.rollbackDue(); due {
		s.RollbackTo = v
	}
	// A new reconcile-at or reset-at value tries the held-back pair once more, and so does
	// a retry that is due.
	held, ok := p.heldBackFailure()
	s.HeldBack = ok && !o.nudged && !p.retryDue(held)
	f := o.recordedFailure()
	if f == nil && s.HeldBack {
		f = held
	}
	s.Retries = p.retriesLeft(f)
	if h := obs.head; h != nil {
		s.Revision, s.OlderDeployed = h.Revision, len(h.OlderDeployed) > 0
		s.TestDue = p.w.Watch.Tests() && obs.state == records.StateInSync && h.MadeByRudder() && h.Tested() == ""
	}
	s.TestRollsBack, s.Made = p.w.Watch.TestRollsBack(), o.madeStep() != nil
	s.Relabel = obs.rel != nil && p.needsAdoption(obs.rel)
	if h := obs.head; p.pin.back > 0 && h != nil && h.ChartDigest == p.want.ChartDigest && h.Status == release.StatusDeployed && !o.taken[plan.RolloutRollback] {
		s.RolloutBack = p.pin.back
	}
	switch {
	case obs.state == records.StateLocked:
		s.Foreign = p.foreign(obs.rel)
	case obs.state == records.StateFailed || (s.Failed == plan.Test && s.TestRollsBack):
		if o.taken[plan.Install] || (s.Failed == plan.Upgrade && !s.RollsBack) {
			break // nothing was deployed before a first install; nothing is rolled back to
		}
		deployed, err := p.w.Helm.LastDeployed(ctx, p.scope, p.relName, obs.head.Revision)
		if err != nil {
			return s, fmt.Errorf("reading release %s: %w", p.relName, err)
		}
		if deployed != nil {
			s.Deployed = deployed.Version
		}
	}
	return s, nil
}

// failed is the action whose failure this pass met ("": none).
func (o *outcome) failed() plan.Action {
	if o.failure == nil {
		return ""
	}
	return o.failure.action.name()
}

// runner is the action that carries out c, with what the pass met that it needs (the failure a
// rollback remedies, the objects drift is restored on, the rollout that halted).
func (p *pass) runner(c plan.Choice, o *outcome) (action, bool) {
	var a action
	switch c.Action {
	case plan.Install:
		a = install{}
	case plan.Upgrade:
		a = upgrade{}
	case plan.Rollback:
		a = rollback{to: c.To, cause: o.failure}
	case plan.RequestRollback:
		a = requestRollback{value: c.Value}
	case plan.RolloutRollback:
		a = rolloutRollback{to: c.To, rollout: p.w.rolloutName(p.want.ChartDigest)}
	case plan.Test:
		a = test{revision: c.To}
	case plan.Unlock:
		a = unlock{}
	case plan.Supersede:
		a = supersede{}
	case plan.Adopt:
		a = adopt{}
	case plan.FinishUninstall:
		a = finishUninstall{}
	case plan.RemoveFailed:
		a = removeFailedInstall{}
	case plan.Reapply:
		a = reapply{objects: o.objects, whole: o.whole, serverSide: o.serverSide}
	case plan.Uninstall:
		a = uninstall{}
	}
	return a, a != nil
}
