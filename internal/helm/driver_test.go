package helm

import (
	"testing"

	release "helm.sh/helm/v4/pkg/release/v1"

	"github.com/rudder-operator/rudder/internal/records"
)

// A run of the tests is recorded once its outcome is known: Helm stores the record while the
// run goes on too (a hook Running, those after it not started), and a process killed then has
// not tested the revision.
func TestTestOutcome(t *testing.T) {
	hook := func(phase release.HookPhase, events ...release.HookEvent) *release.Hook {
		if len(events) == 0 {
			events = []release.HookEvent{release.HookTest}
		}
		return &release.Hook{Events: events, LastRun: release.HookExecution{Phase: phase}}
	}
	for _, tc := range []struct {
		name  string
		hooks []*release.Hook
		want  string
	}{
		{"not started", []*release.Hook{hook(release.HookPhaseUnknown), hook(release.HookPhaseUnknown)}, ""},
		{"the first done, the second running", []*release.Hook{hook(release.HookPhaseSucceeded), hook(release.HookPhaseRunning)}, ""},
		{"the first done, the second not started", []*release.Hook{hook(release.HookPhaseSucceeded), hook(release.HookPhaseUnknown)}, ""},
		{"all succeeded", []*release.Hook{hook(release.HookPhaseSucceeded), hook(release.HookPhaseSucceeded)}, records.TestSucceeded},
		{"one failed, none after it ran", []*release.Hook{hook(release.HookPhaseFailed), hook(release.HookPhaseUnknown)}, records.TestFailed},
		{"one failed, one still running", []*release.Hook{hook(release.HookPhaseFailed), hook(release.HookPhaseRunning)}, ""},
		{"an install hook is no test", []*release.Hook{hook(release.HookPhaseSucceeded, release.HookPostInstall)}, ""},
	} {
		if got := testOutcome(&release.Release{Hooks: tc.hooks}); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}
