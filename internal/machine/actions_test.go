package machine

import (
	"context"
	"testing"

	"github.com/rudder-operator/rudder/internal/helm"
	"github.com/rudder-operator/rudder/internal/helm/helmtest"
	"github.com/rudder-operator/rudder/internal/plan"
	"github.com/rudder-operator/rudder/internal/watches"
)

// Every action plan.Next chooses has an action that carries it out, named as it is chosen.
func TestChooseCarriesOutEveryChoice(t *testing.T) {
	t.Parallel()
	m := helmtest.NewMemory()
	sub := &subject{w: &World{Watch: &watches.Watch{}, Helm: Releases{History: m.History, Actions: m.Actions,
		Owners: m.Owners, Records: m.Records, Objects: m.Objects}}}
	// A rollout keeps the CR on a chart its release no longer holds: an install or upgrade is
	// prepared as far as that read, and ends on it.
	obs := &observation{relName: "r", pin: pin{digest: "gone"}}
	ac := &actor{sub: sub, ob: &observer{sub: sub, obs: obs}, obs: obs}
	for _, name := range plan.Actions {
		rel := observed{}
		if name == plan.AdoptRelease {
			rel.proof = &helm.Proof{} // what the release's objects showed of the CR
		}
		a, ok := ac.choose(context.Background(), plan.Choice{Action: name}, rel, &outcome{})
		if !ok || a.name() != name {
			t.Errorf("%s: carried out by %v (ok %v)", name, a, ok)
		}
	}
	if _, ok := ac.choose(context.Background(), plan.Choice{Action: plan.AdoptRelease}, observed{}, &outcome{}); ok {
		t.Error("a release is adopted without a proof")
	}
	if _, ok := ac.choose(context.Background(), plan.Choice{Action: "no-such-action"}, observed{}, &outcome{}); ok {
		t.Error("a choice plan.Next never makes has an action")
	}
}
