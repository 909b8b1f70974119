package records

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"

	"helm.sh/helm/v4/pkg/release/common"
	release "helm.sh/helm/v4/pkg/release/v1"
	releaseutil "helm.sh/helm/v4/pkg/release/v1/util"
	"helm.sh/helm/v4/pkg/storage"
	"helm.sh/helm/v4/pkg/storage/driver"
)

// What a Client and a Memory read and repair of a release's history, on Helm's storage.

func Last(st *storage.Storage, name string) (*release.Release, error) {
	rel, err := st.Last(name)
	if errors.Is(err, driver.ErrReleaseNotFound) {
		return nil, nil
	}
	return V1Of(rel, err)
}

func Revision(st *storage.Storage, name string, version int) (*release.Release, error) {
	rel, err := st.Get(name, version)
	if errors.Is(err, driver.ErrReleaseNotFound) {
		return nil, nil
	}
	return V1Of(rel, err)
}

// History is every revision of a release, oldest first (none: nil).
func History(st *storage.Storage, name string) ([]*release.Release, error) {
	rs, err := st.History(name)
	if errors.Is(err, driver.ErrReleaseNotFound) {
		return nil, nil
	}
	hist, err := V1sOf(rs, err)
	if err != nil {
		return nil, err
	}
	slices.SortFunc(hist, func(a, b *release.Release) int { return a.Version - b.Version })
	return hist, nil
}

func LastDeployed(st *storage.Storage, name string, before int) (*release.Release, error) {
	rs, err := st.History(name)
	if errors.Is(err, driver.ErrReleaseNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	hist, err := V1s(rs)
	if err != nil {
		return nil, err
	}
	var best *release.Release
	for _, r := range hist {
		if r.Version >= before {
			continue
		}
		if st := r.Info.Status; st != common.StatusDeployed && st != common.StatusSuperseded {
			continue
		}
		if best == nil || r.Version > best.Version {
			best = r
		}
	}
	return best, nil
}

// Unlock marks failed a revision left pending by an operation that is gone (StateLocked), or
// completes it: an upgrade whose last write was lost.
//
// rel is the revision as a pass saw it pending, which may be older than storage: the cache of
// records behind, or this process's memory of a write whose answer was lost while the API
// server went away although the write was made. Unlock reads the revision again (a GET) and
// writes it only if it is still pending; one whose operation did complete is returned as
// storage holds it, unchanged, with unlocked false. (Marking that one failed from the older
// view would undo its operation's last write; the next upgrade would then take the failed
// revision for the release's current one, and mark it superseded: two revisions of one chart
// and values.) Nothing else writes the revision between the read and the write: the operation
// that left it is gone, and a release's passes take turns.
//
// An upgrade that is still pending although it completed (see upgradeCompleted) is marked
// deployed, with its own description: its objects, its wait and its hooks are done, and only
// its last write was lost. Marking it failed would have the next upgrade make another revision
// of the same chart and values, and mark this one superseded.
func Unlock(st *storage.Storage, rel *release.Release) (now *release.Release, unlocked bool, err error) {
	now, err = V1Of(st.Get(rel.Name, rel.Version))
	if err != nil {
		return nil, false, err
	}
	if !now.Info.Status.IsPending() {
		return now, false, nil
	}
	done, err := upgradeCompleted(st, now)
	switch {
	case err != nil:
		return nil, false, err
	case done:
		now.Info.Status = common.StatusDeployed
	default:
		now.SetStatus(common.StatusFailed, fmt.Sprintf("unlocked by rudder: the %s operation that started it is gone", now.Info.Status))
	}
	if err := st.Update(now); err != nil {
		return nil, false, err
	}
	return now, true, nil
}

// upgradeCompleted reports whether rel, a revision left pending-upgrade, completed all but its
// last write. Helm's upgrade (3 and 4 alike) marks the revision it replaces superseded only
// once the objects are applied, waited for and its post-upgrade hooks have run, and then marks
// the new one deployed; every failure before that leaves the replaced revision as it was. The
// replaced revision is the newest deployed one, else the newest if it failed: so an upgrade
// completed when the revision before rel is superseded and none is deployed. (Helm's rollback
// marks the revision it replaces superseded on failure too: a pending rollback is never
// completed here.)
func upgradeCompleted(st *storage.Storage, rel *release.Release) (bool, error) {
	if rel.Info.Status != common.StatusPendingUpgrade {
		return false, nil
	}
	prev, err := Revision(st, rel.Name, rel.Version-1)
	if err != nil || prev == nil || prev.Info.Status != common.StatusSuperseded {
		return false, err
	}
	_, err = st.Deployed(rel.Name)
	switch {
	case errors.Is(err, driver.ErrNoDeployedReleases):
		return true, nil
	case err != nil:
		return false, err
	}
	return false, nil
}

// SupersedeOlder marks every deployed revision of a release but the newest superseded.
func SupersedeOlder(st *storage.Storage, name string) ([]int, error) {
	all, err := st.DeployedAll(name)
	if errors.Is(err, driver.ErrNoDeployedReleases) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	deployed, err := V1s(all)
	if err != nil {
		return nil, err
	}
	releaseutil.SortByRevision(deployed)
	var marked []int
	for _, rel := range deployed[:max(len(deployed)-1, 0)] {
		rel.Info.Status = common.StatusSuperseded
		if err := st.Update(rel); err != nil {
			return marked, fmt.Errorf("marking revision %d of %s superseded: %w", rel.Version, name, err)
		}
		marked = append(marked, rel.Version)
	}
	return marked, nil
}

// KeepFailed keeps revision version of release name — a failed install whose objects Helm's
// uninstall has just removed, keeping the history (its status uninstalled) — as the failure's
// record: failed again, with description (the failure Helm recorded), and LabelObjectsRemoved
// naming it (Head.Kept). Helm's replace installs over such a record and leaves it in the
// history. A revision already kept is left as it is. It returns the revision as kept.
//
// Helm's install, unlike its upgrade, prunes no history: of the failed installs kept before
// this one (a spec that failed to install again and again), the oldest are deleted so that the
// history holds at most limit revisions (0: every one, as Helm's maxHistory).
func KeepFailed(st *storage.Storage, name string, version int, description string, limit int) (*release.Release, error) {
	rel, err := V1Of(st.Get(name, version))
	if err != nil {
		return nil, err
	}
	switch {
	case kept(rel):
	case rel.Info.Status != common.StatusUninstalled:
		return nil, fmt.Errorf("revision %d of %s is %s: only a failed install whose objects were removed is kept", version, name,
			rel.Info.Status)
	default:
		labels := maps.Clone(rel.Labels)
		if labels == nil {
			labels = map[string]string{}
		}
		labels[LabelObjectsRemoved] = strconv.Itoa(version)
		rel.Labels = labels
		rel.SetStatus(common.StatusFailed, description)
		if err := st.Update(rel); err != nil {
			return nil, err
		}
	}
	if limit <= 0 {
		return rel, nil
	}
	hist, err := V1sOf(st.History(name))
	if err != nil {
		return nil, err
	}
	releaseutil.SortByRevision(hist)
	for _, old := range hist[:max(len(hist)-limit, 0)] {
		if old.Version >= version || !kept(old) {
			break
		}
		if _, err := st.Delete(name, old.Version); err != nil {
			return nil, err
		}
	}
	return rel, nil
}

// kept reports whether rel is a failed install kept as its record (Head.Kept).
func kept(rel *release.Release) bool {
	return rel.Info.Status == common.StatusFailed && rel.Labels[LabelObjectsRemoved] == strconv.Itoa(rel.Version)
}
