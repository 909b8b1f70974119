package controllers

import (
	"testing"

	"helm.sh/helm/v3/pkg/release"

	"github.com/rudder-operator/rudder/internal/records"
)

// The pure half of the decision table: state × what the pass met so far → the next action or
// the end. The Helm calls, conditions and Events each row leads to are TestPassDecisionTable's.

// took is a step of action a that ended as v (forbidden: refused to the release's identity).
func took(a action, v verdict, forbidden bool, made bool) *step {
	s := &step{action: a, result: result{verdict: v, forbidden: forbidden}}
	if made {
		s.result.made = &release.Release{Name: "w", Version: 1}
	}
	return s
}

func TestNext(t *testing.T) {
	t.Parallel()
	var (
		installFailed   = took(install{}, failed, false, false)
		upgradeFailed   = took(upgrade{}, failed, false, false)
		upgradeRefused  = took(upgrade{}, failed, true, false)
		rolledBack      = took(rollback{}, failed, false, false)
		installed       = took(install{}, succeeded, false, true)
		upgraded        = took(upgrade{}, succeeded, false, true)
		nameTaken       = took(install{}, succeeded, false, false)
		unlocked        = took(unlock{}, succeeded, false, false)
		removed         = took(removeFailedInstall{}, succeeded, false, false)
		requested       = took(requestRollback{}, succeeded, false, false)
		adopted         = took(adopt{}, succeeded, false, false)
		superseded      = took(supersede{}, succeeded, false, false)
		testFailed      = took(test{}, failed, false, false)
		tested          = took(test{}, succeeded, false, false)
		absent, failedS = records.StateAbsent, records.StateFailed
	)
	cases := []struct {
		name string
		s    situation
		want string // an action's name, or "end:<ending>"
	}{
		// Before any state: the hook's hold, a requested rollback, adoption.
		{"held by a hook", situation{state: records.StateOutOfSync, held: true}, "end:held"},
		{"rollback-to due", situation{state: records.StateInSync, rollbackTo: "1"}, actRequestRollback},
		{"rollback-to handled", situation{state: records.StateRolledBack, rollbackTo: "1", last: requested}, "end:rolled back"},
		{"records of another shard", situation{state: records.StateInSync, relabel: true}, actAdopt},
		{"a halted rollout rolls back", situation{state: records.StateInSync, rolloutBack: 2}, actRolloutRollback},
		{"a halted rollout rolls back an out-of-sync release first", situation{state: records.StateOutOfSync, rolloutBack: 2}, actRolloutRollback},
		{"rolled back by a halted rollout", situation{state: records.StateRolledBack, taken: map[string]bool{actRolloutRollback: true}}, "end:rolled back"},
		{"rolled back by a halted rollout, spec changed since", situation{state: records.StateOutOfSync, taken: map[string]bool{actRolloutRollback: true}}, "end:rolled back"},
		{"adopted", situation{state: records.StateInSync, relabel: true, last: adopted}, "end:in sync"},
		{"another owner's records are not adopted", situation{state: records.StateConflict, relabel: true}, "end:conflict"},

		// Absent.
		{"absent", situation{state: absent}, actInstall},
		{"absent, held back", situation{state: absent, heldBack: true}, "end:held back"},
		{"absent after a refused install", situation{state: absent, failure: installFailed, last: installFailed}, "end:held back"},
		{"absent after removing a failed install", situation{state: absent, failure: installFailed, last: removed}, "end:held back"},
		{"absent after removing a failed install, retries left", situation{state: absent, failure: installFailed, last: removed, retries: true}, "end:retrying"},
		{"absent, held back, retries left", situation{state: absent, heldBack: true, retries: true}, "end:retrying"},
		{"installed", situation{state: records.StateInSync, last: installed}, "end:last"},
		{"name taken, storage says absent", situation{state: absent, last: nameTaken}, "end:last"},

		// Deployed.
		{"in sync", situation{state: records.StateInSync}, "end:in sync"},
		{"in sync, older revisions deployed", situation{state: records.StateInSync, olderDeployed: true}, actSupersede},
		{"in sync, superseded", situation{state: records.StateInSync, olderDeployed: true, last: superseded}, "end:in sync"},
		{"rolled back, kept", situation{state: records.StateRolledBack}, "end:rolled back"},
		{"rolled back, older revisions deployed", situation{state: records.StateRolledBack, olderDeployed: true}, actSupersede},
		{"out of sync", situation{state: records.StateOutOfSync}, actUpgrade},
		{"out of sync, held back", situation{state: records.StateOutOfSync, heldBack: true, rollsBack: true}, "end:held back"},
		{"name taken, storage says out of sync", situation{state: records.StateOutOfSync, last: nameTaken}, actUpgrade},
		{"upgraded", situation{state: records.StateInSync, last: upgraded}, "end:last"},
		{"upgrade refused before a revision", situation{state: records.StateOutOfSync, failure: upgradeFailed, last: upgradeFailed}, "end:held back"},
		{"upgrade forbidden before a revision", situation{state: records.StateOutOfSync, failure: upgradeRefused, last: upgradeRefused}, "end:held back"},
		{"rolled back after a failed upgrade", situation{state: records.StateOutOfSync, failure: rolledBack, last: rolledBack, rollsBack: true}, "end:held back"},

		// Tests (test.enable).
		{"installed, tests due", situation{state: records.StateInSync, last: installed, testDue: true}, actTest},
		{"upgraded, tests due", situation{state: records.StateInSync, last: upgraded, testDue: true, testRollsBack: true}, actTest},
		{"in sync, tests never ran (a crash after the upgrade)", situation{state: records.StateInSync, testDue: true}, actTest},
		{"tested", situation{state: records.StateInSync, last: tested, made: true}, "end:last"},
		{"tested, after a crash", situation{state: records.StateInSync, last: tested}, "end:in sync"},
		{"tests failed, rolled back", situation{state: records.StateInSync, last: testFailed, failure: testFailed, made: true, testRollsBack: true, deployed: 1}, actRollback},
		{"tests failed, nothing to roll back to", situation{state: records.StateInSync, last: testFailed, failure: testFailed, made: true, testRollsBack: true}, "end:held back"},
		{"tests failed, rolled back: kept held back", situation{state: records.StateRolledBack, last: rolledBack, failure: rolledBack, made: true,
			testRollsBack: true, taken: map[string]bool{actTest: true, actRollback: true, actUpgrade: true}}, "end:held back"},
		{"rolled back after failed tests, a later pass", situation{state: records.StateRolledBack, heldBack: true}, "end:held back"},

		// Failed.
		{"failed install left by a dead pass", situation{state: failedS}, actRemoveFailed},
		{"failed install, held back", situation{state: failedS, heldBack: true}, actRemoveFailed},
		{"install failed with a revision", situation{state: failedS, failure: installFailed, last: installFailed}, actRemoveFailed},
		{"failed upgrade left by a dead pass", situation{state: failedS, deployed: 1, rollsBack: true}, actUpgrade},
		{"failed upgrade, held back", situation{state: failedS, deployed: 1, heldBack: true, rollsBack: true}, actRollback},
		{"failed upgrade, held back, rollback off", situation{state: failedS, deployed: 1, heldBack: true}, "end:held back"},
		{"upgrade failed", situation{state: failedS, deployed: 1, failure: upgradeFailed, last: upgradeFailed, rollsBack: true}, actRollback},
		{"upgrade failed, rollback off", situation{state: failedS, failure: upgradeFailed, last: upgradeFailed}, "end:held back"},
		{"upgrade failed, nothing deployed", situation{state: failedS, failure: upgradeFailed, last: upgradeFailed, rollsBack: true}, "end:held back"},
		{"upgrade forbidden with a revision", situation{state: failedS, deployed: 1, failure: upgradeRefused, last: upgradeRefused, rollsBack: true}, actRollback},
		{"rollback left a failed revision", situation{state: failedS, deployed: 1, failure: rolledBack, last: rolledBack, rollsBack: true,
			taken: map[string]bool{actRollback: true}}, "end:held back"},
		{"unlocked, deployed before", situation{state: failedS, deployed: 1, last: unlocked}, actUpgrade},
		{"unlocked, never deployed", situation{state: failedS, last: unlocked}, actRemoveFailed},

		// Pending, uninstalled, someone else's.
		{"left pending by a dead operation", situation{state: records.StateLocked}, actUnlock},
		{"another operation's, in its grace", situation{state: records.StateLocked, foreign: true}, "end:waiting"},
		{"uninstall that died", situation{state: records.StateUninstalled}, actFinishUninstall},
		{"uninstall that died, held back", situation{state: records.StateUninstalled, heldBack: true}, actFinishUninstall},
		{"another owner's release", situation{state: records.StateConflict}, "end:conflict"},
		{"another owner's release after a failed install", situation{state: records.StateConflict, failure: installFailed, last: installFailed}, "end:conflict"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if tc.s.taken == nil {
				tc.s.taken = map[string]bool{}
				for _, st := range []*step{tc.s.failure, tc.s.last} {
					if st != nil {
						tc.s.taken[st.action.String()] = true
						tc.s.made = tc.s.made || st.result.made != nil
					}
				}
			}
			if got := describeNext(next(tc.s)); got != tc.want {
				t.Errorf("next = %s, want %s", got, tc.want)
			}
		})
	}
}

// Every pass ends: from any situation, taking what next says (and marking it taken) reaches
// an end within as many steps as there are actions, and never takes an action twice.
func TestNextEnds(t *testing.T) {
	t.Parallel()
	states := []records.State{records.StateAbsent, records.StateConflict, records.StateLocked, records.StateUninstalled,
		records.StateFailed, records.StateOutOfSync, records.StateInSync, records.StateRolledBack}
	for _, st := range states {
		for flags := range 1 << 10 {
			s := situation{state: st, heldBack: flags&1 != 0, rollsBack: flags&2 != 0, olderDeployed: flags&4 != 0,
				relabel: flags&8 != 0, foreign: flags&16 != 0, testDue: flags&128 != 0, testRollsBack: flags&256 != 0,
				retries: flags&512 != 0, taken: map[string]bool{}}
			if flags&32 != 0 {
				s.deployed = 1
			}
			if flags&64 != 0 {
				s.rollbackTo = "1"
			}
			for n := 0; ; n++ {
				a, _ := next(s)
				if a == nil {
					break
				}
				if n > 10 || s.taken[a.String()] {
					t.Fatalf("%s %010b: %s again after %d steps", st, flags, a, n)
				}
				s.taken[a.String()] = true
				s.last = &step{action: a}
			}
		}
	}
}

func describeNext(a action, e ending) string {
	if a != nil {
		return a.String()
	}
	return "end:" + map[ending]string{endLast: "last", endInSync: "in sync", endRolledBack: "rolled back", endConflict: "conflict",
		endHeldBack: "held back", endWaiting: "waiting", endHeld: "held", endRetrying: "retrying"}[e]
}
