package records

import (
	"testing"

	"helm.sh/helm/v3/pkg/release"
	"helm.sh/helm/v3/pkg/storage"
	"helm.sh/helm/v3/pkg/storage/driver"
)

// TestUnlockReadsStorageFirst: a revision a pass saw pending is marked failed only if storage
// still holds it pending. One whose operation completed (its last write was made although its
// answer was lost) is returned as stored, and not written.
func TestUnlockReadsStorageFirst(t *testing.T) {
	stored := func(s release.Status) (*storage.Storage, *release.Release) {
		st := storage.Init(driver.NewMemory())
		rel := &release.Release{Name: "r", Namespace: "ns", Version: 2, Info: &release.Info{Status: s}}
		if err := st.Create(rel); err != nil {
			t.Fatal(err)
		}
		return st, rel
	}
	// What the pass saw: revision 2 pending-upgrade.
	seen := func() *release.Release {
		return &release.Release{Name: "r", Namespace: "ns", Version: 2, Info: &release.Info{Status: release.StatusPendingUpgrade}}
	}

	st, _ := stored(release.StatusDeployed)
	now, unlocked, err := Unlock(st, seen())
	if err != nil {
		t.Fatal(err)
	}
	if unlocked || now.Info.Status != release.StatusDeployed {
		t.Errorf("completed revision: unlocked %v, returned %s; want false, deployed", unlocked, now.Info.Status)
	}
	if got, _ := st.Get("r", 2); got.Info.Status != release.StatusDeployed {
		t.Errorf("completed revision stored as %s; want it left deployed", got.Info.Status)
	}

	st, _ = stored(release.StatusPendingUpgrade)
	now, unlocked, err = Unlock(st, seen())
	if err != nil {
		t.Fatal(err)
	}
	if !unlocked || now.Info.Status != release.StatusFailed {
		t.Errorf("pending revision: unlocked %v, returned %s; want true, failed", unlocked, now.Info.Status)
	}
	if got, _ := st.Get("r", 2); got.Info.Status != release.StatusFailed {
		t.Errorf("pending revision stored as %s; want failed", got.Info.Status)
	}

	if _, _, err := Unlock(storage.Init(driver.NewMemory()), seen()); err == nil {
		t.Error("a revision storage does not hold: no error")
	}
}
