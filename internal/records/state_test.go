package records

import (
	"strconv"
	"testing"

	"github.com/rudder-operator/rudder/internal/release"
)

func TestDetermineState(t *testing.T) {
	want := Desired{OwnerUID: "u1", ChartDigest: "c1", ValuesDigest: "v1"}
	head := func(s release.Status, uid, c, v string) *Head {
		return &Head{Revision: 3, Status: s, OwnerUID: uid, ChartDigest: c, ValuesDigest: v}
	}
	cases := []struct {
		name string
		head *Head // newest revision; nil: none
		want State
	}{
		{"no release", nil, StateAbsent},
		{"other owner", head(release.StatusDeployed, "u2", "c1", "v1"), StateConflict},
		{"not made by rudder", head(release.StatusDeployed, "", "", ""), StateConflict},
		{"in sync", head(release.StatusDeployed, "u1", "c1", "v1"), StateInSync},
		{"new values", head(release.StatusDeployed, "u1", "c1", "v2"), StateOutOfSync},
		{"new chart", head(release.StatusDeployed, "u1", "c2", "v1"), StateOutOfSync},
		{"pending install", head(release.StatusPendingInstall, "u1", "c1", "v1"), StateLocked},
		{"pending upgrade", head(release.StatusPendingUpgrade, "u1", "c1", "v1"), StateLocked},
		{"pending rollback", head(release.StatusPendingRollback, "u1", "c1", "v1"), StateLocked},
		{"failed", head(release.StatusFailed, "u1", "c1", "v1"), StateFailed},
		{"superseded as newest", head(release.StatusSuperseded, "u1", "c1", "v1"), StateFailed},
		{"uninstalled, history kept", head(release.StatusUninstalled, "u1", "c1", "v1"), StateUninstalled},
		{"an uninstall that died", head(release.StatusUninstalling, "u1", "c1", "v1"), StateUninstalled},
	}
	for _, tc := range cases {
		if got := DetermineState(tc.head, want); got != tc.want {
			t.Errorf("%s: got %s, want %s", tc.name, got, tc.want)
		}
	}
}

// TestDetermineStateRollbacks: a deployed revision rudder did not make from the spec (its
// LabelRevision, copied by Helm's rollback, names another revision) is kept while the CR's
// generation and the chart are what rudder's newest own revision was made from.
func TestDetermineStateRollbacks(t *testing.T) {
	rollback := &Head{Revision: 3, MadeAs: 1, Status: release.StatusDeployed, OwnerUID: "u1", ChartDigest: "c0", ValuesDigest: "v0"}
	own := &Head{Revision: 3, MadeAs: 3, Status: release.StatusDeployed, OwnerUID: "u1", ChartDigest: "c0", ValuesDigest: "v0"}
	legacy := &Head{Revision: 3, Status: release.StatusDeployed, OwnerUID: "u1", ChartDigest: "c0", ValuesDigest: "v0"}
	applied := &Applied{Generation: 2, ChartDigest: "c1"}
	cases := []struct {
		name string
		head *Head
		// gen and chart are the CR's generation and the chart digest now.
		gen     int64
		chart   string
		applied *Applied
		want    State
	}{
		{"rollback, nothing changed since", rollback, 2, "c1", applied, StateRolledBack},
		{"rollback, then the spec changed", rollback, 3, "c1", applied, StateOutOfSync},
		{"rollback, then the chart changed", rollback, 2, "c2", applied, StateOutOfSync},
		{"rollback, what rudder applied unknown", rollback, 2, "c1", nil, StateOutOfSync},
		{"rudder's own revision from other values", own, 2, "c1", applied, StateOutOfSync},
		{"a revision without the label (an older rudder's)", legacy, 2, "c1", nil, StateOutOfSync},
		{"rollback to exactly what is desired", &Head{Revision: 3, MadeAs: 1, Status: release.StatusDeployed, OwnerUID: "u1", ChartDigest: "c1", ValuesDigest: "v1"}, 2, "c1", applied, StateInSync},
		{"failed rollback", &Head{Revision: 3, MadeAs: 1, Status: release.StatusFailed, OwnerUID: "u1", ChartDigest: "c0", ValuesDigest: "v0"}, 2, "c1", applied, StateFailed},
	}
	for _, tc := range cases {
		want := Desired{OwnerUID: "u1", ChartDigest: tc.chart, ValuesDigest: "v1", Generation: tc.gen, Applied: tc.applied}
		if got := DetermineState(tc.head, want); got != tc.want {
			t.Errorf("%s: got %s, want %s", tc.name, got, tc.want)
		}
	}
}

func TestReleaseNameIsStableAndFits(t *testing.T) {
	short := "my-app"
	if ReleaseName(short) != short {
		t.Fatalf("short names must be kept")
	}
	long := "a-very-long-custom-resource-name-that-goes-beyond-helms-fifty-three-character-limit"
	a, b := ReleaseName(long), ReleaseName(long)
	if a != b || len(a) > 53 {
		t.Fatalf("got %q (%d chars), %q", a, len(a), b)
	}
	if ReleaseName(long+"x") == a {
		t.Fatal("different names must not collide")
	}
}

func TestOwnerAnnotationRoundTrip(t *testing.T) {
	gk, key, ok := ParseOwnerAnnotation("apps.sunstrider.cn/Application/default/nginx-sample")
	if !ok || gk.Kind != "Application" || gk.Group != "apps.sunstrider.cn" || key.Namespace != "default" || key.Name != "nginx-sample" {
		t.Fatalf("got %v %v %v", gk, key, ok)
	}
	for _, bad := range []string{"", "a/b", "g/K/ns/", "g//ns/n"} {
		if _, _, ok := ParseOwnerAnnotation(bad); ok {
			t.Errorf("%q parsed", bad)
		}
	}
}

// The facts a record's labels hold of its own revision — the action that made it, a run of
// its tests — are its own only: a rollback copies the labels of the revision it returns to,
// which name that revision's number.
func TestHeadFactsAreTheRevisionsOwn(t *testing.T) {
	labels := func(revision, tested string) map[string]string {
		return map[string]string{LabelRevision: revision, LabelAction: string(ActionInstall), LabelTestedRevision: tested, LabelTestResult: TestFailed,
			"version": "1", "status": "deployed"}
	}
	for _, tc := range []struct {
		name   string
		head   *Head
		action Action
		tested string
	}{
		{"install, tested", HeadOfLabels(labels("1", "1")), ActionInstall, TestFailed},
		{"install, not tested", HeadOfLabels(map[string]string{LabelRevision: "1", LabelAction: "install", "version": "1"}), ActionInstall, ""},
		{"a rollback's copy of revision 1", HeadOf(&release.Release{Version: 3, Labels: labels("1", "1")}), "", ""},
		{"an older rudder's revision", HeadOf(&release.Release{Version: 2, Labels: map[string]string{LabelRevision: "2"}}), "", ""},
	} {
		if got := tc.head.MadeBy(); got != tc.action {
			t.Errorf("%s: made by %q, want %q", tc.name, got, tc.action)
		}
		if got := tc.head.Tested(); got != tc.tested {
			t.Errorf("%s: tested %q, want %q", tc.name, got, tc.tested)
		}
	}
}

// A failed install whose objects were removed is kept only as its own record says: a rollback's
// copy of its labels names another revision, and a record of it that is no longer failed (a
// person's helm rollback of the failure, say) is not one.
func TestKeptFailedInstall(t *testing.T) {
	kept := func(version int, status string, removed string) *Head {
		return HeadOfLabels(map[string]string{"version": strconv.Itoa(version), "status": status, LabelObjectsRemoved: removed})
	}
	for _, tc := range []struct {
		name string
		head *Head
		want bool
	}{
		{"failed, its objects removed", kept(1, "failed", "1"), true},
		{"failed, decoded", HeadOf(&release.Release{Version: 2, Status: release.StatusFailed, Labels: map[string]string{LabelObjectsRemoved: "2"}}), true},
		{"a copy of another revision's label", kept(3, "failed", "1"), false},
		{"deployed", kept(1, "deployed", "1"), false},
		{"failed, objects not removed", kept(1, "failed", ""), false},
	} {
		if got := tc.head.Kept(); got != tc.want {
			t.Errorf("%s: kept %v, want %v", tc.name, got, tc.want)
		}
	}
}

// An uninstalled failed install of rudder's, its failure among its own facts, is a keep that
// died after its uninstall; an uninstall of a revision that did not fail, or of one rudder
// did not make from a spec, is not.
func TestUnkeptFailedInstall(t *testing.T) {
	failed := (Facts{Failed: &Failure{ChartDigest: "c", ValuesDigest: "v", Cause: "InstallFailed"}}).Labels(1)
	head := func(status string, extra map[string]string) *Head {
		l := map[string]string{"version": "1", "status": status, LabelRevision: "1", LabelAction: string(ActionInstall)}
		for k, v := range extra {
			l[k] = v
		}
		return HeadOfLabels(l)
	}
	for _, tc := range []struct {
		name string
		head *Head
		want bool
	}{
		{"uninstalled, its failure among its facts", head("uninstalled", failed), true},
		{"uninstalled, no failure", head("uninstalled", (Facts{}).Labels(1)), false},
		{"failed, not yet uninstalled", head("failed", failed), false},
		{"uninstalled, an upgrade's", head("uninstalled", map[string]string{LabelAction: string(ActionUpgrade), LabelFacts: "1", LabelFailedChart: "c"}), false},
	} {
		if got := tc.head.Unkept(); got != tc.want {
			t.Errorf("%s: unkept %v, want %v", tc.name, got, tc.want)
		}
	}
}
