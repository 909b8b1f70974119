package helm

import (
	"testing"
	"time"

	chart "helm.sh/helm/v4/pkg/chart/v2"
	"helm.sh/helm/v4/pkg/release/common"
	release "helm.sh/helm/v4/pkg/release/v1"

	view "github.com/rudder-operator/rudder/internal/release"
)

// TestViewStatusesAreHelms: rudder's release statuses are the words of the Helm SDK in go.mod,
// every one of them, so that a record's status reads the same through the view.
func TestViewStatusesAreHelms(t *testing.T) {
	for _, s := range []common.Status{common.StatusUnknown, common.StatusDeployed, common.StatusUninstalled,
		common.StatusSuperseded, common.StatusFailed, common.StatusUninstalling, common.StatusPendingInstall,
		common.StatusPendingUpgrade, common.StatusPendingRollback} {
		v := View(&release.Release{Info: &release.Info{Status: s}})
		if string(v.Status) != s.String() || v.Status.IsPending() != s.IsPending() {
			t.Errorf("Helm's %q is rudder's %q (pending %t, Helm's %t)", s, v.Status, v.Status.IsPending(), s.IsPending())
		}
	}
}

func TestView(t *testing.T) {
	if View(nil) != nil || ChartOf(nil) != nil || ChartOf(&view.Release{}) != nil {
		t.Fatal("nil in, nil out")
	}
	at := time.Date(2026, 12, 4, 9, 0, 0, 0, time.UTC)
	ch := &chart.Chart{Metadata: &chart.Metadata{Name: "web", Version: "1.2.0", AppVersion: "2"}}
	rel := &release.Release{Name: "r", Namespace: "ns", Version: 3, Chart: ch, Manifest: "m", Labels: map[string]string{"k": "v"},
		Info: &release.Info{Status: common.StatusDeployed, Description: "d", LastDeployed: at},
		Hooks: []*release.Hook{{Name: "t", Kind: "Pod", Events: []release.HookEvent{release.HookTest},
			DeletePolicies: []release.HookDeletePolicy{release.HookBeforeHookCreation},
			LastRun:        release.HookExecution{Phase: release.HookPhaseFailed, CompletedAt: at}}}}
	v := View(rel)
	switch {
	case v.Name != "r" || v.Namespace != "ns" || v.Version != 3 || v.Status != view.StatusDeployed || v.Description != "d":
		t.Errorf("identity and status: %+v", v)
	case !v.LastDeployed.Equal(at) || v.Manifest != "m" || v.Labels["k"] != "v":
		t.Errorf("times, manifest, labels: %+v", v)
	case v.Chart.Ref() != "web-1.2.0" || v.Chart.AppVersion != "2" || ChartOf(v) != ch:
		t.Errorf("chart: %+v", v.Chart)
	case len(v.Hooks) != 1 || !v.Hooks[0].HasEvent("test") || v.Hooks[0].DeletePolicies[0] != "before-hook-creation" ||
		v.Hooks[0].LastRun.Phase != "Failed" || !v.Hooks[0].LastRun.CompletedAt.Equal(at):
		t.Errorf("hooks: %+v", v.Hooks[0])
	}
	if ran, failed := Tests(v); len(ran) != 1 || len(failed) != 1 {
		t.Errorf("Tests: ran %v, failed %v", ran, failed)
	}
}
