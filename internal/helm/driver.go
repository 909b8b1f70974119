package helm

import (
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"sync/atomic"

	chart "helm.sh/helm/v4/pkg/chart/v2"
	hrelease "helm.sh/helm/v4/pkg/release"
	"helm.sh/helm/v4/pkg/release/common"
	release "helm.sh/helm/v4/pkg/release/v1"
	"helm.sh/helm/v4/pkg/storage"
	"helm.sh/helm/v4/pkg/storage/driver"

	"github.com/rudder-operator/rudder/internal/records"
)

// storing says how an action's new revisions are stored.
type storing struct {
	// chart, when set, is the chart whose crds/ define kinds the action may meet.
	chart *chart.Chart
	// manifest: check stored manifests too (those a post-renderer has not already checked:
	// rollbacks).
	manifest bool
	// spec is the action that makes the revision from a CR's spec (install, upgrade; "":
	// none): LabelRevision records its number, LabelAction the action (an install over a kept
	// failed one makes a later revision than 1), and LabelFacts marks it as carrying the
	// release's facts (records.Facts).
	spec records.Action
	// facts are the release's facts a stamped revision carries as its own (nil: those Helm's
	// upgrade carried over), and failedFacts those it carries once Helm records it failed.
	facts, failedFacts *records.Facts
	// description replaces Helm's own (a rollback's "Rollback to N").
	description string
	// rollback: the action is a rollback rudder makes; LabelRollbackRevision records its number.
	rollback bool
	// testing: the action runs the release's tests; LabelTestedRevision and LabelTestResult
	// record the run on the revision's record.
	testing bool
	// carried are the owner's labels shards select on, for the hooks' marks.
	carried map[string]string
	// record, when set, is the chart the revision's record keeps: Helm was given the rendered
	// one (see render.go). revision is the number the render was made for.
	record   *chart.Chart
	revision int
	// query says which of the action's queries of the release's records the caches answer.
	query records.QueryMode
}

// checkedDriver is a scope's release storage for one action: a revision is checked against
// the scope before it is stored. Storing the new revision is the first write of an install,
// an upgrade and a rollback, before any hook runs or object is applied, and the revision holds
// every hook of every event.
//
// It also notes whether an update of a record failed: Helm's upgrade and rollback log such a
// failure and go on (see run.settle).
type checkedDriver struct {
	// Driver is the storage: a namespace's Secrets (records.Driver), or Helm's memory driver
	// (helmtest.Memory, through StoreMarked).
	driver.Driver
	storing
	check func(*release.Release) error
	// marker marks the hooks of every revision the action stores or reads, so that every hook
	// Helm creates for it carries the owner's marks (nil: no owner, nothing is applied).
	marker *hookMarker
	lost   atomic.Bool
}

func (d *checkedDriver) Get(key string) (hrelease.Releaser, error) {
	r, err := d.Driver.Get(key)
	d.markHooks(r)
	return r, err
}

func (d *checkedDriver) List(filter func(hrelease.Releaser) bool) ([]hrelease.Releaser, error) {
	rls, err := d.Driver.List(filter)
	for _, r := range rls {
		d.markHooks(r)
	}
	return rls, err
}

func (d *checkedDriver) Query(labels map[string]string) ([]hrelease.Releaser, error) {
	rls, err := d.Driver.Query(labels)
	for _, r := range rls {
		d.markHooks(r)
	}
	return rls, err
}

// markHooks marks the hooks of r, a v1 release (storage holds no other).
func (d *checkedDriver) markHooks(r hrelease.Releaser) {
	if rls, err := records.V1(r); err == nil {
		d.marker.markHooks(rls)
	}
}

func (d *checkedDriver) Update(key string, r hrelease.Releaser) error {
	rls, err := records.V1(r)
	if err != nil {
		return err
	}
	if d.spec != "" && d.failedFacts != nil && rls.Info != nil && rls.Info.Status == common.StatusFailed {
		// The revision failed: its record says so among the release's facts at once, not
		// only once the pass writes what it learned (a process killed before then).
		labels := maps.Clone(rls.Labels)
		for _, k := range records.FactLabels {
			delete(labels, k)
		}
		maps.Copy(labels, d.failedFacts.Labels(rls.Version))
		rls.Labels = labels
	}
	if result := testOutcome(rls); d.testing && result != "" {
		// Helm's test action stores how each test hook ran: the record says it in labels too,
		// which the caches of release records hold (a pass decides from them).
		labels := make(map[string]string, len(rls.Labels)+3)
		maps.Copy(labels, rls.Labels)
		labels[records.LabelTestedRevision] = strconv.Itoa(rls.Version)
		labels[records.LabelTestResult] = result
		labels[records.LabelTestedAt] = strconv.FormatInt(TestsEnded(View(rls)).Unix(), 10)
		rls.Labels = labels
	}
	err = d.Driver.Update(key, rls)
	if err != nil {
		d.lost.Store(true)
	}
	return err
}

func (d *checkedDriver) Create(key string, r hrelease.Releaser) error {
	rls, err := records.V1(r)
	if err != nil {
		return err
	}
	if d.revision != 0 && rls.Version != d.revision {
		return &UnavailableError{Err: fmt.Errorf("revision %d of %s was rendered as revision %d: its history moved on during the action",
			rls.Version, rls.Name, d.revision)}
	}
	if d.record != nil {
		rls.Chart = d.record
	}
	d.marker.markHooks(rls)
	if d.check != nil {
		if err := d.check(rls); err != nil {
			return err
		}
	}
	if d.spec != "" {
		labels := make(map[string]string, len(rls.Labels)+2)
		maps.Copy(labels, rls.Labels)
		labels[records.LabelRevision] = strconv.Itoa(rls.Version)
		labels[records.LabelAction] = string(d.spec)
		// The release's facts, as the pass knows them (else as the upgrade carried them over
		// from the newest record; none on a first revision), are this revision's own: a pass
		// that learns more writes them.
		if d.facts != nil {
			for _, k := range records.FactLabels {
				delete(labels, k)
			}
			maps.Copy(labels, d.facts.Labels(rls.Version))
		}
		labels[records.LabelFacts] = strconv.Itoa(rls.Version)
		rls.Labels = labels
	}
	if d.description != "" {
		rls.Info.Description = d.description
	}
	if d.rollback {
		labels := make(map[string]string, len(rls.Labels)+1)
		maps.Copy(labels, rls.Labels)
		labels[records.LabelRollbackRevision] = strconv.Itoa(rls.Version)
		rls.Labels = labels
	}
	return d.Driver.Create(key, rls)
}

// Marks are what an action's new revisions are stored with besides Helm's own (see storing):
// for a test double of the Client's actions, which stores its revisions as the Client does.
type Marks struct {
	// FromSpec is the action that makes the revision from a CR's spec (install, upgrade; "":
	// none): LabelRevision records its number, LabelAction the action.
	FromSpec records.Action
	// Revision, when set, is the number the new revision must have.
	Revision int
	// Description replaces Helm's own; Rollback: a rollback rudder makes
	// (LabelRollbackRevision records its number).
	Description string
	Rollback    bool
	// Tested: the action runs the release's tests (LabelTestedRevision and LabelTestResult
	// record the run).
	Tested bool
	// Facts and FailedFacts are the release's facts a revision made from a spec carries, made
	// or failed (Request.Facts, Request.FailedFacts).
	Facts, FailedFacts *records.Facts
}

// StoreMarked is Helm's storage over d, storing each new revision with m as the Client's
// actions do, without the checks of a scope: the storage of internal/helm/helmtest's Memory.
func StoreMarked(d driver.Driver, m Marks) *storage.Storage {
	st := storage.Init(&checkedDriver{Driver: d, storing: storing{spec: m.FromSpec, facts: m.Facts, failedFacts: m.FailedFacts,
		revision: m.Revision, description: m.Description, rollback: m.Rollback, testing: m.Tested}})
	st.SetLogger(slog.DiscardHandler)
	return st
}

// testOutcome is the outcome of a run of rls's tests once it is known: TestFailed when a test
// hook failed (Helm runs no more after it) and none is still running, TestSucceeded when every
// one succeeded, "" otherwise. Helm also stores the record while the run goes on (a hook
// Running, those after it not started): that is no outcome, and a process killed then has
// not tested the revision.
func testOutcome(rls *release.Release) string {
	failed, done, all := false, 0, 0
	for _, h := range rls.Hooks {
		if !slices.Contains(h.Events, release.HookTest) {
			continue
		}
		all++
		switch h.LastRun.Phase {
		case release.HookPhaseRunning:
			return ""
		case release.HookPhaseFailed:
			failed = true
			done++
		case release.HookPhaseSucceeded:
			done++
		}
	}
	switch {
	case failed:
		return records.TestFailed
	case all > 0 && done == all:
		return records.TestSucceeded
	}
	return ""
}
