package helm

import "helm.sh/helm/v3/pkg/release"

// State is what a release needs, as DetermineState sees it.
type State string

const (
	// StateAbsent: no release of that name: install.
	StateAbsent State = "Absent"
	// StateConflict: a release of that name exists but was not made for this CR: never touch it.
	StateConflict State = "Conflict"
	// StateLocked: the newest revision is pending-install/-upgrade/-rollback. rudder runs one
	// operation per release at a time, so a pending revision found at the start of a pass was
	// left by an operation that died: unlock it.
	StateLocked State = "Locked"
	// StateFailed: the newest revision failed (or is in a state no operation will move on).
	StateFailed State = "Failed"
	// StateOutOfSync: deployed, but from another chart or other values: upgrade.
	StateOutOfSync State = "OutOfSync"
	// StateInSync: deployed from exactly the desired chart and values.
	StateInSync State = "InSync"
)

// Desired identifies the release a CR wants.
type Desired struct {
	OwnerUID     string
	ChartDigest  string // ShortDigest form
	ValuesDigest string
}

// Head is what DetermineState needs of a revision; it can come from a decoded release or from
// the labels of its storage Secret alone.
type Head struct {
	Revision     int
	Status       release.Status
	OwnerUID     string
	ChartDigest  string
	ValuesDigest string
}

// HeadOf extracts a Head from a decoded release.
func HeadOf(rel *release.Release) *Head {
	if rel == nil {
		return nil
	}
	h := &Head{Revision: rel.Version}
	if rel.Info != nil {
		h.Status = rel.Info.Status
	}
	if rel.Labels != nil {
		h.OwnerUID = rel.Labels[LabelOwnerUID]
		h.ChartDigest = rel.Labels[LabelChartDigest]
		h.ValuesDigest = rel.Labels[LabelValuesDigest]
	}
	return h
}

// DetermineState classifies the newest revision of a release (nil: none) against what is
// desired. It is pure: no I/O.
func DetermineState(head *Head, want Desired) State {
	switch {
	case head == nil:
		return StateAbsent
	case head.OwnerUID != want.OwnerUID:
		return StateConflict
	}
	switch head.Status {
	case release.StatusPendingInstall, release.StatusPendingUpgrade, release.StatusPendingRollback:
		return StateLocked
	case release.StatusDeployed:
		if head.ChartDigest == want.ChartDigest && head.ValuesDigest == want.ValuesDigest {
			return StateInSync
		}
		return StateOutOfSync
	case release.StatusUninstalled, release.StatusUninstalling:
		// Only with --keep-history, which rudder never uses: a person uninstalled by hand.
		return StateAbsent
	default: // failed, superseded as newest, unknown
		return StateFailed
	}
}
