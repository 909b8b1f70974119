package plan

import (
	"go/ast"
	"go/parser"
	"go/token"
	"slices"
	"strconv"
	"testing"

	"github.com/rudder-operator/rudder/internal/records"
)

// The pure half of the decision table: state × what the pass met so far → the next action or
// the end. The Helm calls, conditions and Events each row leads to are the controllers'
// TestPassDecisionTable's.

func TestNext(t *testing.T) {
	t.Parallel()
	absent, failedS := records.StateAbsent, records.StateFailed
	cases := []struct {
		name string
		s    Situation
		want string // an action's name, or "end:<ending>"
		// last is the action the pass took last ("": none); with s.Failed, it is taken,
		// unless the row says what was.
		last Action
	}{
		// Before any state: the hook's hold, a requested rollback, adoption.
		{"held by a hook", Situation{State: records.StateOutOfSync, Held: true}, "end:held", ""},
		{"rollback-to due", Situation{State: records.StateInSync, RollbackTo: "1"}, string(RequestRollback), ""},
		{"rollback-to handled", Situation{State: records.StateRolledBack, RollbackTo: "1"}, "end:rolled back", RequestRollback},
		{"records of another shard", Situation{State: records.StateInSync, Relabel: true}, string(Adopt), ""},
		{"a halted rollout rolls back", Situation{State: records.StateInSync, RolloutBack: 2}, string(RolloutRollback), ""},
		{"a halted rollout rolls back an out-of-sync release first", Situation{State: records.StateOutOfSync, RolloutBack: 2}, string(RolloutRollback), ""},
		{"rolled back by a halted rollout", Situation{State: records.StateRolledBack, Taken: map[Action]bool{RolloutRollback: true}}, "end:rolled back", ""},
		{"rolled back by a halted rollout, spec changed since", Situation{State: records.StateOutOfSync, Taken: map[Action]bool{RolloutRollback: true}}, "end:rolled back", ""},
		{"adopted", Situation{State: records.StateInSync, Relabel: true}, "end:in sync", Adopt},
		{"another owner's records are not adopted", Situation{State: records.StateConflict, Relabel: true}, "end:conflict", ""},

		// Absent.
		{"absent", Situation{State: absent}, string(Install), ""},
		{"absent, held back", Situation{State: absent, HeldBack: true}, "end:held back", ""},
		{"absent after a refused install", Situation{State: absent, Failed: Install}, "end:held back", Install},
		{"absent after removing a failed install", Situation{State: absent, Failed: Install}, "end:held back", RemoveFailed},
		{"absent after removing a failed install, retries left", Situation{State: absent, Failed: Install, Retries: true}, "end:retrying", RemoveFailed},
		{"absent, held back, retries left", Situation{State: absent, HeldBack: true, Retries: true}, "end:retrying", ""},
		{"installed", Situation{Made: true, State: records.StateInSync}, "end:last", Install},
		{"name taken, storage says absent", Situation{State: absent}, "end:last", Install},

		// Deployed.
		{"in sync", Situation{State: records.StateInSync}, "end:in sync", ""},
		{"in sync, older revisions deployed", Situation{State: records.StateInSync, OlderDeployed: true}, string(Supersede), ""},
		{"in sync, superseded", Situation{State: records.StateInSync, OlderDeployed: true}, "end:in sync", Supersede},
		{"rolled back, kept", Situation{State: records.StateRolledBack}, "end:rolled back", ""},
		{"rolled back, older revisions deployed", Situation{State: records.StateRolledBack, OlderDeployed: true}, string(Supersede), ""},
		{"out of sync", Situation{State: records.StateOutOfSync}, string(Upgrade), ""},
		{"out of sync, held back", Situation{State: records.StateOutOfSync, HeldBack: true, RollsBack: true}, "end:held back", ""},
		{"name taken, storage says out of sync", Situation{State: records.StateOutOfSync}, string(Upgrade), Install},
		{"upgraded", Situation{Made: true, State: records.StateInSync}, "end:last", Upgrade},
		{"upgrade refused before a revision", Situation{State: records.StateOutOfSync, Failed: Upgrade}, "end:held back", Upgrade},
		{"upgrade forbidden before a revision", Situation{State: records.StateOutOfSync, Failed: Upgrade}, "end:held back", Upgrade},
		{"rolled back after a failed upgrade", Situation{State: records.StateOutOfSync, Failed: Rollback, RollsBack: true}, "end:held back", Rollback},

		// Tests (test.enable).
		{"installed, tests due", Situation{Made: true, State: records.StateInSync, TestDue: true}, string(Test), Install},
		{"upgraded, tests due", Situation{Made: true, State: records.StateInSync, TestDue: true, TestRollsBack: true}, string(Test), Upgrade},
		{"in sync, tests never ran (a crash after the upgrade)", Situation{State: records.StateInSync, TestDue: true}, string(Test), ""},
		{"tested", Situation{State: records.StateInSync, Made: true}, "end:last", Test},
		{"tested, after a crash", Situation{State: records.StateInSync}, "end:in sync", Test},
		{"tests failed, rolled back", Situation{State: records.StateInSync, Failed: Test, Made: true, TestRollsBack: true, Deployed: 1}, string(Rollback), Test},
		{"tests failed, nothing to roll back to", Situation{State: records.StateInSync, Failed: Test, Made: true, TestRollsBack: true}, "end:held back", Test},
		{"tests failed, rolled back: kept held back", Situation{State: records.StateRolledBack, Failed: Rollback, Made: true,
			TestRollsBack: true, Taken: map[Action]bool{Test: true, Rollback: true, Upgrade: true}}, "end:held back", Rollback},
		{"rolled back after failed tests, a later pass", Situation{State: records.StateRolledBack, HeldBack: true}, "end:held back", ""},

		// Failed.
		{"failed install left by a dead pass", Situation{State: failedS}, string(RemoveFailed), ""},
		{"failed install, held back", Situation{State: failedS, HeldBack: true}, string(RemoveFailed), ""},
		{"install failed with a revision", Situation{State: failedS, Failed: Install}, string(RemoveFailed), Install},
		{"failed upgrade left by a dead pass", Situation{State: failedS, Deployed: 1, RollsBack: true}, string(Upgrade), ""},
		{"failed upgrade, held back", Situation{State: failedS, Deployed: 1, HeldBack: true, RollsBack: true}, string(Rollback), ""},
		{"failed upgrade, held back, rollback off", Situation{State: failedS, Deployed: 1, HeldBack: true}, "end:held back", ""},
		{"upgrade failed", Situation{State: failedS, Deployed: 1, Failed: Upgrade, RollsBack: true}, string(Rollback), Upgrade},
		{"upgrade failed, rollback off", Situation{State: failedS, Failed: Upgrade}, "end:held back", Upgrade},
		{"upgrade failed, nothing deployed", Situation{State: failedS, Failed: Upgrade, RollsBack: true}, "end:held back", Upgrade},
		{"upgrade forbidden with a revision", Situation{State: failedS, Deployed: 1, Failed: Upgrade, RollsBack: true}, string(Rollback), Upgrade},
		{"rollback left a failed revision", Situation{State: failedS, Deployed: 1, Failed: Rollback, RollsBack: true,
			Taken: map[Action]bool{Rollback: true}}, "end:held back", Rollback},
		{"unlocked, deployed before", Situation{State: failedS, Deployed: 1}, string(Upgrade), Unlock},
		{"unlocked, never deployed", Situation{State: failedS}, string(RemoveFailed), Unlock},
		{"kept after removing the objects of a failed install", Situation{State: failedS, Kept: true, Failed: Install,
			Taken: map[Action]bool{Install: true, RemoveFailed: true}}, "end:held back", RemoveFailed},
		{"kept after removing the objects of a failed install, retries left", Situation{State: failedS, Kept: true, Failed: Install, Retries: true,
			Taken: map[Action]bool{Install: true, RemoveFailed: true}}, "end:retrying", RemoveFailed},
		{"kept after removing the objects of a failed install a dead pass left", Situation{State: failedS, Kept: true, HeldBack: true,
			Taken: map[Action]bool{RemoveFailed: true}}, "end:held back", RemoveFailed},
		{"failed install kept, objects removed", Situation{State: failedS, Kept: true}, string(Install), ""},
		{"failed install kept, held back", Situation{State: failedS, Kept: true, HeldBack: true}, "end:held back", ""},
		{"failed install kept, held back, retries left", Situation{State: failedS, Kept: true, HeldBack: true, Retries: true}, "end:retrying", ""},
		{"failed install kept, installed over it and failed again", Situation{State: failedS, Failed: Install}, string(RemoveFailed), Install},
		{"failed install kept, installed over it and the install refused", Situation{State: failedS, Kept: true, Failed: Install}, "end:held back", Install},

		// Pending, uninstalled, someone else's.
		{"left pending by a dead operation", Situation{State: records.StateLocked}, string(Unlock), ""},
		{"another operation's, in its grace", Situation{State: records.StateLocked, Foreign: true}, "end:waiting", ""},
		{"uninstall that died", Situation{State: records.StateUninstalled}, string(FinishUninstall), ""},
		{"uninstall that died, held back", Situation{State: records.StateUninstalled, HeldBack: true}, string(FinishUninstall), ""},
		{"a failed install's keep that died after its uninstall", Situation{State: records.StateUninstalled, Unkept: true, HeldBack: true}, string(RemoveFailed), ""},
		{"a failed install's keep finished", Situation{State: failedS, Kept: true, HeldBack: true}, "end:held back", RemoveFailed},
		{"another owner's release", Situation{State: records.StateConflict}, "end:conflict", ""},
		{"another owner's release after a failed install", Situation{State: records.StateConflict, Failed: Install}, "end:conflict", Install},

		// Dependencies (dependsOn): no install or upgrade until they are ready; the rest acts.
		{"absent, a dependency not ready", Situation{State: absent, Waits: true}, "end:dependencies", ""},
		{"out of sync, a dependency not ready", Situation{State: records.StateOutOfSync, Waits: true}, "end:dependencies", ""},
		{"in sync, a dependency not ready", Situation{State: records.StateInSync, Waits: true}, "end:in sync", ""},
		{"drift due, a dependency not ready", Situation{State: records.StateInSync, Waits: true, DriftDue: true}, string(Reapply), ""},
		{"failed upgrade left by a dead pass, a dependency not ready", Situation{State: failedS, Deployed: 1, RollsBack: true, Waits: true},
			"end:dependencies", ""},
		{"upgrade failed, a dependency not ready", Situation{State: failedS, Deployed: 1, Failed: Upgrade, RollsBack: true, Waits: true},
			string(Rollback), Upgrade},
		{"failed install kept, a dependency not ready", Situation{State: failedS, Kept: true, Waits: true}, "end:dependencies", ""},
		{"failed install left by a dead pass, a dependency not ready", Situation{State: failedS, Waits: true}, string(RemoveFailed), ""},
		{"left pending, a dependency not ready", Situation{State: records.StateLocked, Waits: true}, string(Unlock), ""},
		{"deleted, a dependency not ready", Situation{Deleting: true, State: records.StateInSync, Waits: true}, string(Uninstall), ""},

		// Drift, once the pass looks at the objects of the revision it ends on.
		{"drift due", Situation{State: records.StateInSync, DriftDue: true}, string(Reapply), ""},
		{"drift restored", Situation{State: records.StateInSync, DriftDue: true}, "end:last", Reapply},

		// A deleted CR.
		{"deleted, its release deployed", Situation{Deleting: true, State: records.StateInSync}, string(Uninstall), ""},
		{"deleted, its release failed", Situation{Deleting: true, State: failedS, HeldBack: true}, string(Uninstall), ""},
		{"deleted, its failed install kept", Situation{Deleting: true, State: failedS, Kept: true, HeldBack: true}, string(Uninstall), ""},
		{"deleted, its release pending", Situation{Deleting: true, State: records.StateLocked, Foreign: true}, string(Uninstall), ""},
		{"deleted, uninstalled", Situation{Deleting: true, State: records.StateInSync}, "end:last", Uninstall},
		{"deleted, no release", Situation{Deleting: true, State: absent}, "end:gone", ""},
		{"deleted, another owner's release", Situation{Deleting: true, State: records.StateConflict}, "end:gone", ""},
		{"another Helm operator's release, proven the CR's", Situation{State: records.StateConflict, Adoptable: true}, string(AdoptRelease), ""},
		{"another Helm operator's release, adopted", Situation{State: records.StateConflict, Adoptable: true}, "end:conflict", AdoptRelease},
		{"deleted, another Helm operator's release proven the CR's", Situation{Deleting: true, State: records.StateConflict, Adoptable: true}, "end:gone", ""},
		{"deleted to be kept, its release deployed", Situation{Deleting: true, Keep: true, State: records.StateInSync}, string(LetGo), ""},
		{"deleted to be kept, its release pending", Situation{Deleting: true, Keep: true, State: records.StateLocked, Foreign: true}, string(LetGo), ""},
		{"deleted to be kept, let go", Situation{Deleting: true, Keep: true, State: records.StateInSync}, "end:gone", LetGo},
		{"deleted to be kept, no release", Situation{Deleting: true, Keep: true, State: absent}, "end:gone", ""},
		{"deleted to be kept, another owner's release", Situation{Deleting: true, Keep: true, State: records.StateConflict}, "end:gone", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if tc.s.Taken == nil {
				tc.s.Taken = map[Action]bool{}
				for _, a := range []Action{tc.s.Failed, tc.last} {
					if a != "" {
						tc.s.Taken[a] = true
					}
				}
			}
			if got := describeNext(Next(tc.s)); got != tc.want {
				t.Errorf("Next = %s, want %s", got, tc.want)
			}
		})
	}
}

// Every pass ends: from any situation, taking what Next says (and marking it taken) reaches
// an end within as many steps as there are actions, and never takes an action twice.
func TestNextEnds(t *testing.T) {
	t.Parallel()
	states := []records.State{records.StateAbsent, records.StateConflict, records.StateLocked, records.StateUninstalled,
		records.StateFailed, records.StateOutOfSync, records.StateInSync, records.StateRolledBack}
	for _, st := range states {
		for flags := range 1 << 14 {
			s := Situation{State: st, HeldBack: flags&1 != 0, RollsBack: flags&2 != 0, OlderDeployed: flags&4 != 0,
				Relabel: flags&8 != 0, Foreign: flags&16 != 0, TestDue: flags&128 != 0, TestRollsBack: flags&256 != 0,
				Retries: flags&512 != 0, Deleting: flags&1024 != 0, DriftDue: flags&2048 != 0, Keep: flags&4096 != 0, Adoptable: flags&8192 != 0, Taken: map[Action]bool{}}
			if flags&32 != 0 {
				s.Deployed = 1
			}
			if flags&64 != 0 {
				s.RollbackTo = "1"
			}
			for n := 0; ; n++ {
				c, _ := Next(s)
				if c.None() {
					break
				}
				if n > 10 || s.Taken[c.Action] {
					t.Fatalf("%s %014b: %s again after %d steps", st, flags, c.Action, n)
				}
				s.Taken[c.Action] = true
			}
		}
	}
}

func describeNext(c Choice, e Ending) string {
	if !c.None() {
		return string(c.Action)
	}
	return "end:" + e.String()
}

// TestActionsListsEveryAction holds Actions, which the actions metric's help lists, to the
// Action constants plan.go declares: a new action cannot be left out of it.
func TestActionsListsEveryAction(t *testing.T) {
	f, err := parser.ParseFile(token.NewFileSet(), "plan.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	var declared []Action
	for _, d := range f.Decls {
		g, ok := d.(*ast.GenDecl)
		if !ok || g.Tok != token.CONST {
			continue
		}
		for _, spec := range g.Specs {
			v := spec.(*ast.ValueSpec)
			if typ, ok := v.Type.(*ast.Ident); !ok || typ.Name != "Action" {
				continue
			}
			for _, val := range v.Values {
				s, err := strconv.Unquote(val.(*ast.BasicLit).Value)
				if err != nil {
					t.Fatal(err)
				}
				declared = append(declared, Action(s))
			}
		}
	}
	if len(declared) < 10 {
		t.Fatalf("found %d Action constants in plan.go: the test no longer reads them", len(declared))
	}
	slices.Sort(declared)
	listed := slices.Sorted(slices.Values(Actions))
	if !slices.Equal(declared, listed) {
		t.Errorf("Actions lists %v; plan.go declares %v", listed, declared)
	}
}
