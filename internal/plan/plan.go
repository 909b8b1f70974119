// Package plan is the decision of a pass, as a pure function: Next maps the situation of a
// CR's release (its state, as records.DetermineState classifies the newest revision, and the
// few facts the pass met so far) to the one action to take now, or to how the pass ends.
//
// It reaches nothing: no client, no clock, no Helm, no status. Everything it decides from is
// a field of Situation, which the pass fills in first, and what it decides is a Choice (the
// action's name and what it acts on), which the pass runs. That it stays so is the compiler's
// to hold: the package imports records for the State it classifies, and nothing of the pass.
package plan

import (
	"github.com/rudder-operator/rudder/internal/records"
)

// Action names an action of a pass: the rudder_release_actions_total label, the action of its
// Events, and the key by which a pass takes each action at most once (Situation.Taken).
type Action string

const (
	Install         Action = "install"
	Upgrade         Action = "upgrade"
	Rollback        Action = "rollback"
	RequestRollback Action = "rollback-to"
	Unlock          Action = "unlock"
	FinishUninstall Action = "finish-uninstall"
	RemoveFailed    Action = "remove-failed-install"
	Supersede       Action = "supersede"
	Adopt           Action = "adopt"
	Reapply         Action = "reapply"
	Test            Action = "test"
	RolloutRollback Action = "rollout-rollback"
	// Uninstall is the uninstall of a deleted CR's release.
	Uninstall Action = "uninstall"
	// AdoptRelease takes over a release another Helm operator (or helm) made, whose objects
	// prove it is the CR's (Situation.Adoptable): no new revision, nothing recreated.
	AdoptRelease Action = "adopt-release"
	// LetGo hands a deleted CR's release, records and objects, over to whoever manages them
	// next, uninstalling nothing (Situation.Keep).
	LetGo Action = "let-go"
)

// Actions is every Action, in the order the rudder_release_actions_total help lists them;
// TestActionsListsEveryAction holds it to the constants above.
var Actions = []Action{
	Install, Upgrade, Rollback, RequestRollback, RolloutRollback, Test, Unlock, Supersede, Adopt, AdoptRelease,
	Reapply, RemoveFailed, FinishUninstall, Uninstall, LetGo,
}

// Choice is the action Next chose and what it acts on. The zero Choice is none: the pass ends.
type Choice struct {
	Action Action
	// To is the revision a rollback returns to, or whose tests run.
	To int
	// Value is the rudder.dev/rollback-to value a requested rollback acts on.
	Value string
}

// None reports whether the choice is to take no action.
func (c Choice) None() bool { return c.Action == "" }

// Ending is how a pass ends when no action is left to take.
type Ending int

const (
	// EndLast: on the result of the install or upgrade that made the revision the pass ends
	// on, else of the pass's last action.
	EndLast Ending = iota
	// EndInSync: on a deployed revision made from the current spec and chart.
	EndInSync
	// EndRolledBack: on a deployed rollback that is kept (records.StateRolledBack).
	EndRolledBack
	// EndConflict: on a release of the CR's name that another owner made.
	EndConflict
	// EndHeldBack: on a (chart, values) that failed, in this pass or before.
	EndHeldBack
	// EndWaiting: on another operation's pending revision.
	EndWaiting
	// EndHeld: on a pre-release hook's hold.
	EndHeld
	// EndRetrying: on a failure that is tried again after a back-off (remediation.retries).
	EndRetrying
	// EndGone: a deleted CR's release is gone (uninstalled, never made, or another owner's,
	// which is left alone): its finalizer may go.
	EndGone
	// EndDependencies: on an install or upgrade that waits for a CR the CR depends on.
	EndDependencies
)

// String names the ending, for tests and logs.
func (e Ending) String() string {
	return [...]string{"last", "in sync", "rolled back", "conflict", "held back", "waiting", "held", "retrying", "gone", "dependencies"}[e]
}

// Situation is everything Next decides from.
type Situation struct {
	State records.State
	// Deleting: the CR is being deleted; State is StateAbsent when it has no release, and
	// StateConflict when the release is another owner's.
	Deleting bool
	// Keep: the CR is deleted with its release and objects kept (rudder.dev/on-delete: keep).
	Keep bool
	// Held: a pre-release hook holds the release ("not now").
	Held bool
	// Waits: a CR the CR depends on (dependsOn) is not ready: no install or upgrade is made,
	// every other action is.
	Waits bool
	// RollbackTo is the rudder.dev/rollback-to value to act on ("" when none is due).
	RollbackTo string
	// HeldBack: the desired (chart, values) failed in an earlier pass, and is not tried again
	// until one of them changes, or its retry is due.
	HeldBack bool
	// Retries: the failure of the desired pair (this pass's, else the held-back one) has
	// retries left (remediation.retries): the pass waits for the next instead of holding it
	// back.
	Retries bool
	// RollsBack: the watch rolls a failed upgrade back (rollbackOnFailure).
	RollsBack bool
	// OlderDeployed: older revisions are still marked deployed next to the deployed newest.
	OlderDeployed bool
	// Relabel: the release's records carry other shard labels than the CR has.
	Relabel bool
	// Adoptable: in StateConflict, the release is not rudder's, and every object of its newest
	// deployed revision that exists says it is the CR's (an owner reference to it, or
	// operator-sdk's primary-resource annotations), as the helm-operators of operator-sdk and
	// HOP write them.
	Adoptable bool
	// Kept: the failed newest revision is a failed install whose objects were removed and
	// whose record is kept (records.Head.Kept): an install replaces it, unless the failure
	// still holds its (chart, values) back.
	Kept bool
	// Unkept: the uninstalled newest revision is a failed install whose objects were removed
	// but whose record a process that died did not mark kept (records.Head.Unkept): keeping it
	// is finished (RemoveFailed), not the uninstall.
	Unkept bool
	// Foreign: the pending newest revision belongs to an operation rudder did not start that
	// may still be running.
	Foreign bool
	// Revision is the newest revision (0: none); Deployed, in StateFailed or after a failed
	// test, the newest deployed revision before it (0: none).
	Revision, Deployed int
	// TestDue: the watch tests its releases, and the newest revision is one rudder made from
	// the spec whose tests have not run; TestRollsBack: a failed test is rolled back.
	TestDue, TestRollsBack bool
	// RolloutBack is the revision a halted rollout (onHalt rollback) returns the release to
	// (0: none).
	RolloutBack int
	// DriftDue: the objects of the revision the pass ends on differ from its manifest, or may
	// (one was not seen): set only once the pass looks at them, after the release's actions.
	DriftDue bool
	// Made: an install or upgrade of this pass made the newest revision.
	Made bool
	// Failed is the action whose failure this pass met ("": none); no install or upgrade
	// follows it.
	Failed Action
	// Taken is every action the pass took.
	Taken map[Action]bool
}

// testFailed reports whether the failure this pass met is a test's (one that is rolled back:
// a failed test that is only reported is no failure of the release).
func (s Situation) testFailed() bool { return s.Failed == Test }

// Next is the one step after s: an action, or (Choice.None) the end of the pass.
func Next(s Situation) (Choice, Ending) {
	c, end := s.step()
	if c.None() && end == EndHeldBack && s.Retries {
		return Choice{}, EndRetrying
	}
	return c, end
}

// step is Next's choice before retries: a pair that failed is held back.
func (s Situation) step() (Choice, Ending) {
	switch {
	case s.Deleting:
		return s.deleting()
	case s.DriftDue:
		return s.once(Choice{Action: Reapply}, EndLast)
	case s.Held:
		return Choice{}, EndHeld
	case s.RollbackTo != "" && !s.Taken[RequestRollback]:
		return Choice{Action: RequestRollback, Value: s.RollbackTo}, 0
	case s.Taken[RolloutRollback]:
		return Choice{}, EndRolledBack
	case s.RolloutBack > 0:
		return Choice{Action: RolloutRollback, To: s.RolloutBack}, 0
	case s.TestDue && !s.Taken[Test]:
		return Choice{Action: Test, To: s.Revision}, 0
	case s.testFailed() && s.TestRollsBack && s.Deployed > 0:
		return s.once(Choice{Action: Rollback, To: s.Deployed}, EndHeldBack)
	case s.testFailed():
		return Choice{}, EndHeldBack
	case s.Made && s.Failed == "":
		return Choice{}, EndLast
	case s.Relabel && s.State != records.StateConflict && !s.Taken[Adopt]:
		return Choice{Action: Adopt}, 0
	}
	return s.forState()
}

// deleting is the step for a deleted CR: its own release is uninstalled, once; a release of
// another owner, or none, lets the CR go.
func (s Situation) deleting() (Choice, Ending) {
	switch {
	case s.State == records.StateAbsent || s.State == records.StateConflict:
		return Choice{}, EndGone
	case s.Keep:
		return s.once(Choice{Action: LetGo}, EndGone)
	}
	return s.once(Choice{Action: Uninstall}, EndLast)
}

// once is c, unless the pass took it already: then the pass ends as otherwise says.
func (s Situation) once(c Choice, otherwise Ending) (Choice, Ending) {
	if s.Taken[c.Action] {
		return Choice{}, otherwise
	}
	return c, 0
}

// forState is Next's step for the release's state.
func (s Situation) forState() (Choice, Ending) {
	failedBefore := s.HeldBack || s.Failed != ""
	switch s.State {
	case records.StateConflict:
		if s.Adoptable {
			return s.once(Choice{Action: AdoptRelease}, EndConflict)
		}
		return Choice{}, EndConflict
	case records.StateInSync, records.StateRolledBack:
		end := EndInSync
		switch {
		case s.State == records.StateRolledBack && failedBefore:
			// The rollback of a revision whose tests failed: the pair stays held back.
			end = EndHeldBack
		case s.State == records.StateRolledBack:
			end = EndRolledBack
		}
		if s.OlderDeployed {
			return s.once(Choice{Action: Supersede}, end)
		}
		return Choice{}, end
	case records.StateLocked:
		if s.Foreign {
			return Choice{}, EndWaiting
		}
		return s.once(Choice{Action: Unlock}, EndLast)
	case records.StateUninstalled:
		if s.Unkept {
			return s.once(Choice{Action: RemoveFailed}, EndLast)
		}
		return s.once(Choice{Action: FinishUninstall}, EndLast)
	case records.StateFailed:
		return s.failed(failedBefore)
	case records.StateOutOfSync:
		if failedBefore {
			return Choice{}, EndHeldBack
		}
		return s.release(Upgrade)
	default: // records.StateAbsent
		if failedBefore {
			return Choice{}, EndHeldBack
		}
		return s.release(Install)
	}
}

// release is an install or upgrade, once, unless the CR waits for its dependencies.
func (s Situation) release(a Action) (Choice, Ending) {
	if s.Waits && !s.Taken[a] {
		return Choice{}, EndDependencies
	}
	return s.once(Choice{Action: a}, EndLast)
}

// failed is Next's step for a failed newest revision (records.StateFailed).
func (s Situation) failed(failedBefore bool) (Choice, Ending) {
	switch {
	case s.Failed == Upgrade && (!s.RollsBack || s.Deployed == 0):
		return Choice{}, EndHeldBack // not rolled back, or nothing to roll back to
	case s.Deployed == 0 && s.Kept && failedBefore:
		return Choice{}, EndHeldBack
	case s.Deployed == 0 && s.Kept:
		return s.release(Install)
	case s.Deployed == 0:
		return s.once(Choice{Action: RemoveFailed}, EndLast)
	case failedBefore && s.RollsBack:
		return s.once(Choice{Action: Rollback, To: s.Deployed}, EndHeldBack)
	case failedBefore:
		return Choice{}, EndHeldBack
	}
	return s.release(Upgrade)
}
