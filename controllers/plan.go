package controllers

import (
	"context"
	"fmt"

	"helm.sh/helm/v3/pkg/release"

	"github.com/rudder-operator/rudder/internal/records"
)

// The pass decides in two pure steps: records.DetermineState classifies the release's newest
// revision against what the CR wants, and next maps that state, with the few facts of a
// situation, to the one action to take now, or to how the pass ends. The pass runs the action,
// observes the release as the action left it, and asks next again: an install that failed is
// followed by the removal of what it left, an upgrade that failed by a rollback, an unlock by
// the upgrade it unblocks. An action is taken at most once per pass, so every pass ends.

// situation is everything next decides from.
type situation struct {
	state records.State
	// held: a pre-release hook holds the release ("not now").
	held bool
	// rollbackTo is the rudder.dev/rollback-to value to act on ("" when none is due).
	rollbackTo string
	// heldBack: the desired (chart, values) failed in an earlier pass, and is not tried again
	// until one of them changes, or its retry is due.
	heldBack bool
	// retries: the failure of the desired pair (this pass's, else the held-back one) has
	// retries left (remediation.retries): the pass waits for the next instead of holding it
	// back.
	retries bool
	// rollsBack: the watch rolls a failed upgrade back (rollbackOnFailure).
	rollsBack bool
	// olderDeployed: older revisions are still marked deployed next to the deployed newest.
	olderDeployed bool
	// relabel: the release's records carry other shard labels than the CR has.
	relabel bool
	// foreign: the pending newest revision belongs to an operation rudder did not start that
	// may still be running.
	foreign bool
	// revision is the newest revision (0: none); deployed, in StateFailed or after a failed
	// test, the newest deployed revision before it (0: none).
	revision, deployed int
	// testDue: the watch tests its releases, and the newest revision is one rudder made from
	// the spec whose tests have not run; testRollsBack: a failed test is rolled back.
	testDue, testRollsBack bool
	// rolloutBack is the revision a halted rollout (onHalt rollback) returns the release to
	// (0: none).
	rolloutBack int
	// made: an install or upgrade of this pass made the newest revision.
	made bool
	// failure is the failure this pass met (nil: none): no install or upgrade follows it.
	failure *step
	// last is the action this pass took last (nil: none yet); taken, every action it took.
	last  *step
	taken map[string]bool
}

// testFailed reports whether the failure this pass met is a test's (one that is rolled back:
// a failed test that is only reported is no failure of the release).
func (s situation) testFailed() bool {
	return s.failure != nil && s.failure.action.String() == actTest
}

// upgradeFailed reports whether the failure this pass met is an upgrade's.
func (s situation) upgradeFailed() bool {
	return s.failure != nil && s.failure.action.String() == actUpgrade
}

// situation is what next decides from, for the release as obs has it; in StateFailed it reads
// the deployed revision before the failed one.
func (p *pass) situation(ctx context.Context, obs observed, o *outcome) (situation, error) {
	s := situation{state: obs.state, held: p.held != nil, rollsBack: p.r.opts.Watch.RollsBack(),
		failure: o.failure, last: o.last(), taken: o.taken}
	if v, due := p.rollbackDue(); due {
		s.rollbackTo = v
	}
	// A new reconcile-at or reset-at value tries the held-back pair once more, and so does
	// a retry that is due.
	held, ok := p.heldBackFailure()
	s.heldBack = ok && !o.nudged && !p.retryDue(held)
	f := o.recordedFailure()
	if f == nil && s.heldBack {
		f = held
	}
	s.retries = p.retriesLeft(f)
	if h := obs.head; h != nil {
		s.revision, s.olderDeployed = h.Revision, len(h.OlderDeployed) > 0
		s.testDue = p.r.opts.Watch.Tests() && obs.state == records.StateInSync && h.MadeByRudder() && h.Tested() == "" && p.tested() != h.Revision
	}
	s.testRollsBack, s.made = p.r.opts.Watch.TestRollsBack(), o.madeStep() != nil
	s.relabel = obs.rel != nil && p.needsAdoption(obs.rel)
	if h := obs.head; p.pin.back > 0 && h != nil && h.ChartDigest == p.want.ChartDigest && h.Status == release.StatusDeployed && !o.taken[actRolloutRollback] {
		s.rolloutBack = p.pin.back
	}
	switch {
	case obs.state == records.StateLocked:
		s.foreign = p.foreign(obs.rel)
	case obs.state == records.StateFailed || (s.testFailed() && s.testRollsBack):
		if o.taken[actInstall] || (s.upgradeFailed() && !s.rollsBack) {
			break // nothing was deployed before a first install; nothing is rolled back to
		}
		deployed, err := p.r.opts.Helm.LastDeployed(ctx, p.scope, p.relName, obs.head.Revision)
		if err != nil {
			return s, fmt.Errorf("reading release %s: %w", p.relName, err)
		}
		if deployed != nil {
			s.deployed = deployed.Version
		}
	}
	return s, nil
}

// ending is how a pass ends when no action is left to take.
type ending int

const (
	// endLast: on the result of the install or upgrade that made the revision the pass ends
	// on, else of the pass's last action.
	endLast ending = iota
	// endInSync: on a deployed revision made from the current spec and chart.
	endInSync
	// endRolledBack: on a deployed rollback that is kept (records.StateRolledBack).
	endRolledBack
	// endConflict: on a release of the CR's name that another owner made.
	endConflict
	// endHeldBack: on a (chart, values) that failed, in this pass or before.
	endHeldBack
	// endWaiting: on another operation's pending revision.
	endWaiting
	// endHeld: on a pre-release hook's hold.
	endHeld
	// endRetrying: on a failure that is tried again after a back-off (remediation.retries).
	endRetrying
)

// Action names: the rudder_release_actions_total label, the action of Events, and the key
// by which a pass takes each action at most once.
const (
	actInstall         = "install"
	actUpgrade         = "upgrade"
	actRollback        = "rollback"
	actRequestRollback = "rollback-to"
	actUnlock          = "unlock"
	actFinishUninstall = "finish-uninstall"
	actRemoveFailed    = "remove-failed-install"
	actSupersede       = "supersede"
	actAdopt           = "adopt"
	actReapply         = "reapply"
	actTest            = "test"
	actRolloutRollback = "rollout-rollback"
	// actUninstall is the uninstall of a deleted CR's release, which finalize runs.
	actUninstall = "uninstall"
)

// next is the one step after situation s: an action, or (nil) the end of the pass. It is pure.
func next(s situation) (action, ending) {
	a, end := s.step()
	if a == nil && end == endHeldBack && s.retries {
		return nil, endRetrying
	}
	return a, end
}

// step is next's choice before retries: a pair that failed is held back.
func (s situation) step() (action, ending) {
	switch {
	case s.held:
		return nil, endHeld
	case s.rollbackTo != "" && !s.taken[actRequestRollback]:
		return requestRollback{value: s.rollbackTo}, 0
	case s.taken[actRolloutRollback]:
		return nil, endRolledBack
	case s.rolloutBack > 0:
		return rolloutRollback{to: s.rolloutBack}, 0
	case s.testDue && !s.taken[actTest]:
		return test{revision: s.revision}, 0
	case s.testFailed() && s.testRollsBack && s.deployed > 0:
		return s.once(rollback{to: s.deployed, cause: s.failure}, endHeldBack)
	case s.testFailed():
		return nil, endHeldBack
	case s.made && s.failure == nil:
		return nil, endLast
	case s.relabel && s.state != records.StateConflict && !s.taken[actAdopt]:
		return adopt{}, 0
	}
	return s.forState()
}

// once is a, unless the pass took it already: then the pass ends as otherwise says.
func (s situation) once(a action, otherwise ending) (action, ending) {
	if s.taken[a.String()] {
		return nil, otherwise
	}
	return a, 0
}

// forState is next's step for the release's state.
func (s situation) forState() (action, ending) {
	failedBefore := s.heldBack || s.failure != nil
	switch s.state {
	case records.StateConflict:
		return nil, endConflict
	case records.StateInSync, records.StateRolledBack:
		end := endInSync
		switch {
		case s.state == records.StateRolledBack && failedBefore:
			// The rollback of a revision whose tests failed: the pair stays held back.
			end = endHeldBack
		case s.state == records.StateRolledBack:
			end = endRolledBack
		}
		if s.olderDeployed {
			return s.once(supersede{}, end)
		}
		return nil, end
	case records.StateLocked:
		if s.foreign {
			return nil, endWaiting
		}
		return s.once(unlock{}, endLast)
	case records.StateUninstalled:
		return s.once(finishUninstall{}, endLast)
	case records.StateFailed:
		switch {
		case s.upgradeFailed() && (!s.rollsBack || s.deployed == 0):
			return nil, endHeldBack // not rolled back, or nothing to roll back to
		case s.deployed == 0:
			return s.once(removeFailedInstall{}, endLast)
		case failedBefore && s.rollsBack:
			return s.once(rollback{to: s.deployed, cause: s.failure}, endHeldBack)
		case failedBefore:
			return nil, endHeldBack
		}
		return s.once(upgrade{}, endLast)
	case records.StateOutOfSync:
		if failedBefore {
			return nil, endHeldBack
		}
		return s.once(upgrade{}, endLast)
	default: // records.StateAbsent
		if failedBefore {
			return nil, endHeldBack
		}
		return s.once(install{}, endLast)
	}
}
