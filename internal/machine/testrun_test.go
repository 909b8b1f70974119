package machine

import (
	"testing"
	"time"

	"github.com/rudder-operator/rudder/internal/release"
)

// The Tested condition names each failed test Pod and how it ended; the tail of its log only
// with the watch's test.showLogs (the Event always has it).
func TestFailedPodsKeepLogsForTheEvent(t *testing.T) {
	t.Parallel()
	rel := &release.Release{Hooks: []*release.Hook{
		{Name: "web-checks", LastRun: release.HookRun{Phase: "Failed", End: "phase Failed, container test exited 3 Error", Log: "log: a | b"}},
		{Name: "web-passes", LastRun: release.HookRun{Phase: "Succeeded"}},
		{Name: "web-pending", LastRun: release.HookRun{Phase: "Failed", End: "phase Pending", Log: "no log: waiting"}},
	}}
	if got, want := failedPods(rel, false), "; Pod web-checks: phase Failed, container test exited 3 Error; Pod web-pending: phase Pending"; got != want {
		t.Errorf("without logs: %q\nwant %q", got, want)
	}
	if got, want := failedPods(rel, true), "; Pod web-checks: phase Failed, container test exited 3 Error; log: a | b; Pod web-pending: phase Pending; no log: waiting"; got != want {
		t.Errorf("with logs: %q\nwant %q", got, want)
	}
	end := time.Date(2026, 12, 7, 14, 0, 0, 700, time.UTC)
	rel.Hooks[0].Events, rel.Hooks[0].LastRun.CompletedAt = []string{"test"}, end
	rel.Hooks[1].Events, rel.Hooks[1].LastRun.StartedAt = []string{"test"}, end.Add(-time.Minute)
	if at := testsEnded(rel); at == nil || !at.Time.Equal(time.Unix(end.Unix(), 0)) {
		t.Errorf("testsEnded = %v, want %s to the second", at, end)
	}
}
