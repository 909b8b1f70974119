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
