package records

import (
	"strconv"
	"testing"

	"helm.sh/helm/v4/pkg/release/common"
	release "helm.sh/helm/v4/pkg/release/v1"
	"helm.sh/helm/v4/pkg/storage"
	"helm.sh/helm/v4/pkg/storage/driver"
)

// TestUnlockReadsStorageFirst: a revision a pass saw pending is marked failed only if storage
// still holds it pending. One whose operation completed (its last write was made although its
// answer was lost) is returned as stored, and not written.
func TestUnlockReadsStorageFirst(t *testing.T) {
	stored := func(s common.Status) (*storage.Storage, *release.Release) {
		st := storage.Init(driver.NewMemory())
		rel := &release.Release{Name: "r", Namespace: "ns", Version: 2, Info: &release.Info{Status: s}}
		if err := st.Create(rel); err != nil {
			t.Fatal(err)
		}
		return st, rel
	}
	// What the pass saw: revision 2 pending-upgrade.
	seen := func() *release.Release {
		return &release.Release{Name: "r", Namespace: "ns", Version: 2, Info: &release.Info{Status: common.StatusPendingUpgrade}}
	}

	st, _ := stored(common.StatusDeployed)
	now, unlocked, err := Unlock(st, seen())
	if err != nil {
		t.Fatal(err)
	}
	if unlocked || now.Info.Status != common.StatusDeployed {
		t.Errorf("completed revision: unlocked %v, returned %s; want false, deployed", unlocked, now.Info.Status)
	}
	if got, _ := V1Of(st.Get("r", 2)); got.Info.Status != common.StatusDeployed {
		t.Errorf("completed revision stored as %s; want it left deployed", got.Info.Status)
	}

	st, _ = stored(common.StatusPendingUpgrade)
	now, unlocked, err = Unlock(st, seen())
	if err != nil {
		t.Fatal(err)
	}
	if !unlocked || now.Info.Status != common.StatusFailed {
		t.Errorf("pending revision: unlocked %v, returned %s; want true, failed", unlocked, now.Info.Status)
	}
	if got, _ := V1Of(st.Get("r", 2)); got.Info.Status != common.StatusFailed {
		t.Errorf("pending revision stored as %s; want failed", got.Info.Status)
	}

	if _, _, err := Unlock(storage.Init(driver.NewMemory()), seen()); err == nil {
		t.Error("a revision storage does not hold: no error")
	}
}

// TestUnlockCompletesAnUpgradeWhoseLastWriteWasLost: a pending upgrade whose replaced revision
// is superseded, with no revision deployed, had its objects, wait and hooks done (Helm marks
// the replaced one superseded only then): Unlock marks it deployed, description kept. Every
// other pending revision is marked failed.
func TestUnlockCompletesAnUpgradeWhoseLastWriteWasLost(t *testing.T) {
	for _, c := range []struct {
		name    string
		history []common.Status // revisions 1.., the last one pending
		want    common.Status
	}{
		{"upgrade completed", []common.Status{common.StatusSuperseded, common.StatusPendingUpgrade}, common.StatusDeployed},
		{"upgrade of a failed revision completed", []common.Status{common.StatusSuperseded, common.StatusSuperseded, common.StatusPendingUpgrade}, common.StatusDeployed},
		{"upgrade not completed", []common.Status{common.StatusDeployed, common.StatusPendingUpgrade}, common.StatusFailed},
		{"upgrade of a failed revision not completed", []common.Status{common.StatusDeployed, common.StatusFailed, common.StatusPendingUpgrade}, common.StatusFailed},
		{"the revision before failed", []common.Status{common.StatusSuperseded, common.StatusFailed, common.StatusPendingUpgrade}, common.StatusFailed},
		{"another revision deployed", []common.Status{common.StatusDeployed, common.StatusSuperseded, common.StatusPendingUpgrade}, common.StatusFailed},
		{"a first revision", []common.Status{common.StatusPendingUpgrade}, common.StatusFailed},
		{"a rollback", []common.Status{common.StatusSuperseded, common.StatusSuperseded, common.StatusPendingRollback}, common.StatusFailed},
		{"an install", []common.Status{common.StatusPendingInstall}, common.StatusFailed},
	} {
		t.Run(c.name, func(t *testing.T) {
			st := storage.Init(driver.NewMemory())
			var last *release.Release
			for i, s := range c.history {
				last = &release.Release{Name: "r", Namespace: "ns", Version: i + 1, Info: &release.Info{Status: s, Description: "rudder upgrade"}}
				if err := st.Create(last); err != nil {
					t.Fatal(err)
				}
			}
			now, unlocked, err := Unlock(st, last)
			if err != nil {
				t.Fatal(err)
			}
			stored, _ := V1Of(st.Get("r", last.Version))
			if !unlocked || now.Info.Status != c.want || stored.Info.Status != c.want {
				t.Errorf("unlocked %v, returned %s, stored %s; want true, %s", unlocked, now.Info.Status, stored.Info.Status, c.want)
			}
			if c.want == common.StatusDeployed && stored.Info.Description != "rudder upgrade" {
				t.Errorf("completed revision described %q; want its own description kept", stored.Info.Description)
			}
		})
	}
}

// TestKeepFailed: a failed install whose objects an uninstall removed (uninstalled, history
// kept) becomes the failure's kept record — failed, the failure's description, marked
// LabelObjectsRemoved with its own number, its other labels as they were; keeping it again
// changes nothing; a revision that is neither is refused unchanged; and the failed installs
// kept before it go, oldest first, so that the history holds at most the limit.
func TestKeepFailed(t *testing.T) {
	st := storage.Init(driver.NewMemory())
	for v := 1; v <= 3; v++ {
		status := common.StatusFailed
		labels := map[string]string{LabelObjectsRemoved: strconv.Itoa(v), LabelOwnerUID: "u"}
		if v == 3 {
			status, labels = common.StatusUninstalled, map[string]string{LabelOwnerUID: "u"}
		}
		if err := st.Create(&release.Release{Name: "r", Namespace: "ns", Version: v, Labels: labels,
			Info: &release.Info{Status: status, Description: "Uninstallation complete"}}); err != nil {
			t.Fatal(err)
		}
	}
	for range 2 {
		if _, err := KeepFailed(st, "r", 3, `Release "r" failed: boom`, 2); err != nil {
			t.Fatal(err)
		}
	}
	hist, err := V1sOf(st.History("r"))
	if err != nil {
		t.Fatal(err)
	}
	if len(hist) != 2 {
		t.Fatalf("%d revisions kept, want 2 (the limit)", len(hist))
	}
	got, _ := Revision(st, "r", 3)
	if got == nil || !kept(got) || got.Info.Description != `Release "r" failed: boom` || got.Labels[LabelOwnerUID] != "u" {
		t.Fatalf("revision 3 kept as %+v", got)
	}
	if first, _ := Revision(st, "r", 1); first != nil {
		t.Error("revision 1, the oldest failed install kept, is still there over the limit")
	}

	if err := st.Create(&release.Release{Name: "r", Namespace: "ns", Version: 4, Info: &release.Info{Status: common.StatusDeployed}}); err != nil {
		t.Fatal(err)
	}
	if _, err := KeepFailed(st, "r", 4, "x", 0); err == nil {
		t.Error("a deployed revision kept as a failed install")
	}
	if got, _ := Revision(st, "r", 4); got.Info.Status != common.StatusDeployed {
		t.Errorf("the refused revision became %s", got.Info.Status)
	}
}
