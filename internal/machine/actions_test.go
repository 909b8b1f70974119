package machine

import (
	"testing"

	"github.com/rudder-operator/rudder/internal/plan"
	"github.com/rudder-operator/rudder/internal/watches"
)

// Every action plan.Next chooses has an action that carries it out, named as it is chosen.
func TestRunnerCarriesOutEveryChoice(t *testing.T) {
	t.Parallel()
	ac := &actor{observation: &observation{subject: &subject{w: &World{Watch: &watches.Watch{}}}}}
	for _, name := range []plan.Action{plan.Install, plan.Upgrade, plan.Rollback, plan.RequestRollback, plan.Unlock, plan.FinishUninstall,
		plan.RemoveFailed, plan.Supersede, plan.Adopt, plan.Reapply, plan.Test, plan.RolloutRollback, plan.Uninstall} {
		a, ok := ac.runner(plan.Choice{Action: name}, &outcome{})
		if !ok || a.name() != name {
			t.Errorf("%s: carried out by %v (ok %v)", name, a, ok)
		}
	}
	if _, ok := ac.runner(plan.Choice{Action: "no-such-action"}, &outcome{}); ok {
		t.Error("a choice plan.Next never makes has an action")
	}
}
