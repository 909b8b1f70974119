package records

import (
	"strconv"
	"time"

	"github.com/rudder-operator/rudder/internal/release"
)

// State is what a release needs, as DetermineState sees it.
type State string

const (
	// StateAbsent: no release of that name: install.
	StateAbsent State = "Absent"
	// StateConflict: a release of that name exists but was not made for this CR: never touch it.
	StateConflict State = "Conflict"
	// StateLocked: the newest revision is pending-install/-upgrade/-rollback. rudder runs one
	// operation per release at a time, so a pending revision found at the start of a pass was
	// left by an operation that died: Unlock it.
	StateLocked State = "Locked"
	// StateUninstalled: the newest revision is uninstalling (an uninstall that died, such as
	// rudder's clean-up of a failed install) or uninstalled with its history kept (helm
	// uninstall --keep-history). Helm refuses to install over either: finish the uninstall,
	// then install.
	StateUninstalled State = "Uninstalled"
	// StateFailed: the newest revision failed (or is in a state no operation will move on).
	StateFailed State = "Failed"
	// StateOutOfSync: deployed, but from another chart or other values: upgrade.
	StateOutOfSync State = "OutOfSync"
	// StateInSync: deployed from exactly the desired chart and values.
	StateInSync State = "InSync"
	// StateRolledBack: deployed, from other values or another chart, as a revision rudder did
	// not make from the spec (helm rollback, rudder.dev/rollback-to), while neither the CR's
	// generation nor the chart has changed since rudder's newest own revision: keep it.
	StateRolledBack State = "RolledBack"
)

// Head is what DetermineState needs of a revision; it can come from a decoded release or from
// the labels of its storage Secret alone.
type Head struct {
	Revision     int
	Status       release.Status
	OwnerUID     string
	ChartDigest  string
	ValuesDigest string
	// MadeAs is the revision number rudder stored the revision's record as (LabelRevision): a
	// rollback copies it from the revision it returns to, so it equals Revision only for
	// revisions rudder made from a spec. 0 when absent.
	MadeAs int
	// RollbackAs is the revision number rudder stored a rollback it made as
	// (LabelRollbackRevision); 0 when absent.
	RollbackAs int
	// Action is LabelAction: what made the revision MadeAs names ("" when absent).
	Action Action
	// TestedAs and TestResult are LabelTestedRevision and LabelTestResult: the revision whose
	// tests ran last on this record, and how (0 and "" when absent).
	TestedAs   int
	TestResult string
	// TestedAt is LabelTestedAt: when that run ended (zero: the record does not say).
	TestedAt time.Time
	// RemovedAs is LabelObjectsRemoved: the failed install whose objects were removed and
	// whose record is kept (0 when absent).
	RemovedAs int
	// Facts are the release's facts: as this record carries them as its own, or (NewestHead)
	// as the newest older record that does (a rollback's copy of another revision's facts is
	// not the release's). nil: none (records rudder made before 647f429, 2026-12-02).
	Facts *Facts
	// OlderDeployed lists the older revisions still marked deployed (CachedHead only: a
	// decoded release does not know its history). Helm marks the revision an upgrade or a
	// rollback replaces superseded, but only logs a failure to: such a history wants
	// Client.Supersede.
	OlderDeployed []int
}

// MadeByRudder reports whether rudder made the revision from a CR's spec (install, upgrade).
func (h *Head) MadeByRudder() bool { return h.MadeAs == h.Revision }

// MadeBy is the action that made the revision from a CR's spec; "" for a revision rudder did
// not make from a spec (a rollback, another tool's) or whose record does not say (an older
// rudder's).
func (h *Head) MadeBy() Action {
	if !h.MadeByRudder() {
		return ""
	}
	return h.Action
}

// Tested is the result of the run of this revision's tests its record holds; "" when its
// tests have not run (a rollback's copy of another revision's result included).
func (h *Head) Tested() string {
	if h.TestedAs != h.Revision {
		return ""
	}
	return h.TestResult
}

// Kept reports whether the revision is a failed install rudder removed the objects of and kept
// the record of (LabelObjectsRemoved names it, not a copy of another's): the release has no
// objects, and Helm installs over it with Install.Replace.
func (h *Head) Kept() bool { return h.RemovedAs == h.Revision && h.Status == release.StatusFailed }

// Unkept reports whether the revision is a failed install whose objects were removed, keeping
// the history, but whose record was not marked kept: the process that kept it died in between
// (uninstalled, made by rudder's install, carrying a failure among its own facts). Keeping it
// is finished; it is not purged as an uninstall that died is.
func (h *Head) Unkept() bool {
	return h.Status == release.StatusUninstalled && h.MadeBy() == ActionInstall && h.Facts != nil && h.Facts.Failed != nil
}

// RudderRollback reports whether the revision is a rollback rudder made.
func (h *Head) RudderRollback() bool { return h.RollbackAs == h.Revision }

// Pending reports whether an operation is (or was, if it died) writing the revision.
func (h *Head) Pending() bool {
	switch h.Status {
	case release.StatusPendingInstall, release.StatusPendingUpgrade, release.StatusPendingRollback:
		return true
	}
	return false
}

// RolledBackTo is the revision a rollback revision returned to, when the labels say (0
// otherwise).
func (h *Head) RolledBackTo() int {
	if h.MadeByRudder() {
		return 0
	}
	return h.MadeAs
}

// HeadOf extracts a Head from a decoded release.
func HeadOf(rel *release.Release) *Head {
	if rel == nil {
		return nil
	}
	h := &Head{Revision: rel.Version, Status: rel.Status}
	if rel.Labels != nil {
		h.OwnerUID = rel.Labels[LabelOwnerUID]
		h.ChartDigest = rel.Labels[LabelChartDigest]
		h.ValuesDigest = rel.Labels[LabelValuesDigest]
		h.MadeAs = madeAs(rel.Labels)
		h.RollbackAs = labelInt(rel.Labels, LabelRollbackRevision)
		h.Action = Action(rel.Labels[LabelAction])
		h.TestedAs, h.TestResult = labelInt(rel.Labels, LabelTestedRevision), rel.Labels[LabelTestResult]
		h.TestedAt = labelTime(rel.Labels, LabelTestedAt)
		h.RemovedAs = labelInt(rel.Labels, LabelObjectsRemoved)
		h.Facts = ownFacts(rel.Labels, rel.Version)
	}
	return h
}

// HeadOfLabels extracts a Head from the labels of a release's storage Secret.
func HeadOfLabels(l map[string]string) *Head {
	v, err := strconv.Atoi(l["version"])
	if err != nil {
		return nil
	}
	return &Head{Revision: v, Status: release.Status(l["status"]), OwnerUID: l[LabelOwnerUID],
		ChartDigest: l[LabelChartDigest], ValuesDigest: l[LabelValuesDigest], MadeAs: madeAs(l), RollbackAs: labelInt(l, LabelRollbackRevision),
		Action: Action(l[LabelAction]), TestedAs: labelInt(l, LabelTestedRevision), TestResult: l[LabelTestResult],
		TestedAt:  labelTime(l, LabelTestedAt),
		RemovedAs: labelInt(l, LabelObjectsRemoved), Facts: ownFacts(l, v)}
}

func madeAs(l map[string]string) int { return labelInt(l, LabelRevision) }

// ownFacts are the facts the labels of revision version's record carry as its own (nil: none,
// or a copy of another's).
func ownFacts(l map[string]string, version int) *Facts {
	if f := FactsOf(l); f != nil && f.Of == version {
		return f
	}
	return nil
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
	if head.Pending() {
		return StateLocked
	}
	switch head.Status {
	case release.StatusDeployed:
		switch {
		case head.ChartDigest == want.ChartDigest && head.ValuesDigest == want.ValuesDigest:
			return StateInSync
		case !head.MadeByRudder() && want.Applied != nil &&
			want.Applied.Generation == want.Generation && want.Applied.ChartDigest == want.ChartDigest:
			return StateRolledBack
		}
		return StateOutOfSync
	case release.StatusUninstalled, release.StatusUninstalling:
		return StateUninstalled
	default: // failed, superseded as newest, unknown
		return StateFailed
	}
}
