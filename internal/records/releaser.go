package records

import (
	"fmt"

	hrelease "helm.sh/helm/v4/pkg/release"
	release "helm.sh/helm/v4/pkg/release/v1"
)

// V1 is what Helm 4's storage and actions hand out (release.Releaser) as the v1 release every
// record rudder reads and writes is (nil for nil).
func V1(r hrelease.Releaser) (*release.Release, error) {
	switch x := r.(type) {
	case nil:
		return nil, nil
	case *release.Release:
		return x, nil
	case release.Release:
		return &x, nil
	default:
		return nil, fmt.Errorf("release of type %T: rudder reads v1 releases only", r)
	}
}

// V1s is V1 of each of rs.
func V1s(rs []hrelease.Releaser) ([]*release.Release, error) {
	out := make([]*release.Release, 0, len(rs))
	for _, r := range rs {
		v, err := V1(r)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, nil
}

// V1Of is V1 of what a read or an action returned, with its error: an action that fails
// returns the revision it stored (failed) beside the error.
func V1Of(r hrelease.Releaser, err error) (*release.Release, error) {
	v, verr := V1(r)
	if err == nil {
		err = verr
	}
	return v, err
}

// V1sOf is V1s of what a query returned.
func V1sOf(rs []hrelease.Releaser, err error) ([]*release.Release, error) {
	if err != nil {
		return nil, err
	}
	return V1s(rs)
}

// releasers is rs as Helm's storage interfaces take them.
func releasers(rs []*release.Release, err error) ([]hrelease.Releaser, error) {
	if err != nil {
		return nil, err
	}
	out := make([]hrelease.Releaser, len(rs))
	for i, r := range rs {
		out[i] = r
	}
	return out, nil
}
