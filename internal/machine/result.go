package machine

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	rstatus "github.com/rudder-operator/rudder/api/status"
	"github.com/rudder-operator/rudder/internal/helm"
	"github.com/rudder-operator/rudder/internal/records"
	"github.com/rudder-operator/rudder/internal/release"
)

// The types an action's result speaks in, which every other file of the pass builds on: the
// result itself, and what it carries (a condition, an Event's note, what status.release
// learns, the release as observed). The action and its environment are in env.go, the
// outcome the pass folds the results into in outcome.go.

// verdict is how an action ended.
type verdict int

const (
	// succeeded: it did what it does; the pass decides again from what it left.
	succeeded verdict = iota
	// failed: it failed for what the CR and the chart want, or the API server refused the
	// release's identity (result.forbidden); the pass decides again: the remedy (removing a
	// failed install, a rollback) or the end.
	failed
	// retry: a transient failure; the pass ends and is retried with back-off.
	retry
	// blocked: it may not act: the pass ends, Stalled until the CR, the chart or the cluster
	// changes (values that do not validate, another owner's release), or, with
	// result.requeue, waiting for something else (another operation) and looking again then.
	blocked
)

// label is the verdict as the result label of rudder_release_action_duration_seconds.
func (v verdict) label() string {
	switch v {
	case succeeded:
		return "ok"
	case failed:
		return "failed"
	case retry:
		return "retry"
	}
	return "blocked"
}

// result is what an action (or the end of a pass) reports.
type result struct {
	verdict verdict
	// reason and message say why: the reason Released, Stalled or Ready give when the result
	// ends the pass. err is the error a retry returns to controller-runtime.
	reason, message string
	err             error
	// forbidden: the API server refused the release's identity. Such a failure is remedied
	// like any other but never held back: granting the rule recovers without a change.
	forbidden bool
	// released is Released as the action leaves it (nil: unchanged), and conditions the
	// other condition types it sets (RollbackRequest, Tested, …); notes are its Events.
	released   *condition
	conditions map[string]*condition
	notes      []note
	requeue    time.Duration
	// after is the release as the action left it when the action knows it (nil: the pass
	// reads storage); its state is the pass's to classify (observer.classify).
	after *observed
	// made is the revision an install or upgrade made, and objects what Helm's client knew of
	// its objects (see helm.Request.Objects).
	made    *release.Release
	objects []*unstructured.Unstructured
	// rendered are those objects whole (helm.Request.Rendered), for readiness to judge one the
	// cache does not show yet.
	rendered []*unstructured.Unstructured
	// record is what status.release learns.
	record record
	// phase is what the pass ended in when a succeeded result ends it; head and rel the
	// revision it ended on (nil: none), whose objects the pass then looks at.
	phase phase
	head  *records.Head
	rel   *release.Release
	// recheck: the objects are looked at again by every pass until one finds them as the
	// manifest has them (a reapply that failed); restored is how many objects it restored.
	recheck  bool
	restored int
	// call is how the action's own work went, as rudder_release_actions_total counts it (do
	// counts it, for every action): its Helm call, or the writes it made (callNone: it found
	// nothing to do, as a supersede with nothing to mark, or met no call at all).
	call callResult
}

// callResult is how an action's work went.
type callResult int

const (
	callNone callResult = iota
	callOK
	callFailed
)

// callOf is the callResult of an action's work that ended in err.
func callOf(err error) callResult {
	if err != nil {
		return callFailed
	}
	return callOK
}

// label is the result label of rudder_release_actions_total.
func (c callResult) label() string {
	if c == callFailed {
		return "failed"
	}
	return "ok"
}

// phase is what a pass ended in; it is also the value of the rudder_release_state gauge.
type phase string

const (
	phasePaused     phase = "Paused"     // rudder.dev/paused: no action
	phaseInSync     phase = "InSync"     // deployed from the current spec and chart
	phaseRolledBack phase = "RolledBack" // a rollback rudder did not make from the spec, kept
	phaseHeld       phase = "Held"       // a pre-release hook said "not now"
	phaseWaiting    phase = "Waiting"    // an install or upgrade waits for the CRs the CR depends on
	phaseLocked     phase = "Locked"     // waiting for someone else's pending operation
	phaseStalled    phase = "Stalled"    // nothing to do until the CR, the chart or the cluster changes
	phaseFailed     phase = "Failed"     // a release action failed and is retried with back-off
	phaseRetrying   phase = "Retrying"   // a failed (chart, values) waits for its next try (remediation.retries)
)

// condition is the new value of one condition (its type is where it is kept).
type condition struct {
	status  metav1.ConditionStatus
	reason  string
	message string
}

// note is an Event to record (and log) on the CR.
type note struct {
	typ, reason, action, message string
}

// record is what a step learned that status.release keeps. Steps return it as data; report
// writes it, in writeRelease, the one writer of status.release.
type record struct {
	// revision is the revision the release is on now (nil: unchanged).
	revision *revisionRecord
	// failed holds the desired (chart, values) back from now on (nil: unchanged); clearFailed
	// lets a held-back pair go.
	failed      *failure
	clearFailed bool
	// rollbackRequest is the rudder.dev/rollback-to value handled (nil: unchanged).
	rollbackRequest *string
	// tested is the outcome of a run of the tests (nil: unchanged).
	tested *rstatus.TestedRelease
	// reconcileRequest and resetRequest are the reconcile-at and reset-at values handled
	// (nil: unchanged).
	reconcileRequest, resetRequest *string
}

// revisionRecord is a revision as status.release records it.
type revisionRecord struct {
	number                    int
	chart                     string // name-version (helm.ChartRef)
	chartDigest, valuesDigest string
	// rolledBackTo is the revision it is a rollback to (0: it is none).
	rolledBackTo int
	// applied, when set, is what rudder's newest own revision was made from (nil: unchanged).
	applied *rstatus.AppliedRelease
}

// observed is the release as a pass found it (the zero value: no release, as after an
// uninstall).
type observed struct {
	// head is the newest revision (nil: none).
	head *records.Head
	// rel is the decoded newest revision when storage was read (nil when the cache decided).
	rel *release.Release
	// state is what the release needs, decided once per read by records.DetermineState.
	state records.State
	// assumed: nothing was read. The cache of records shows no revision of a CR no pass acted
	// on before (Found.TakenOn), so its release is taken to be absent; Helm's install checks
	// the name in storage before it writes.
	assumed bool
	// deployed is the newest deployed revision before head, read when a rollback may return
	// to it (0: none, or not read); proof what a release rudder did not make showed of the CR
	// (nil: not read). observer.closer reads both.
	deployed int
	proof    *helm.Proof
}

// truncate cuts s to n bytes, marking the cut.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n-3] + "..."
}
