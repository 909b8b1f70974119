package records

import (
	"errors"
	"fmt"

	"helm.sh/helm/v3/pkg/release"
	"helm.sh/helm/v3/pkg/releaseutil"
	"helm.sh/helm/v3/pkg/storage"
	"helm.sh/helm/v3/pkg/storage/driver"
)

// What a Client and a Memory read and repair of a release's history, on Helm's storage.

func Last(st *storage.Storage, name string) (*release.Release, error) {
	rel, err := st.Last(name)
	if errors.Is(err, driver.ErrReleaseNotFound) {
		return nil, nil
	}
	return rel, err
}

func Revision(st *storage.Storage, name string, version int) (*release.Release, error) {
	rel, err := st.Get(name, version)
	if errors.Is(err, driver.ErrReleaseNotFound) {
		return nil, nil
	}
	return rel, err
}

func LastDeployed(st *storage.Storage, name string, before int) (*release.Release, error) {
	hist, err := st.History(name)
	if errors.Is(err, driver.ErrReleaseNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var best *release.Release
	for _, r := range hist {
		if r.Version >= before {
			continue
		}
		if st := r.Info.Status; st != release.StatusDeployed && st != release.StatusSuperseded {
			continue
		}
		if best == nil || r.Version > best.Version {
			best = r
		}
	}
	return best, nil
}

func Unlock(st *storage.Storage, rel *release.Release) error {
	rel.SetStatus(release.StatusFailed, fmt.Sprintf("unlocked by rudder: the %s operation that started it is gone", rel.Info.Status))
	return st.Update(rel)
}

// SupersedeOlder marks every deployed revision of a release but the newest superseded.
func SupersedeOlder(st *storage.Storage, name string) ([]int, error) {
	deployed, err := st.DeployedAll(name)
	if errors.Is(err, driver.ErrNoDeployedReleases) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	releaseutil.SortByRevision(deployed)
	var marked []int
	for _, rel := range deployed[:max(len(deployed)-1, 0)] {
		rel.Info.Status = release.StatusSuperseded
		if err := st.Update(rel); err != nil {
			return marked, fmt.Errorf("marking revision %d of %s superseded: %w", rel.Version, name, err)
		}
		marked = append(marked, rel.Version)
	}
	return marked, nil
}
