package records

import (
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
