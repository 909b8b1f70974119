package machine

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	rstatus "github.com/rudder-operator/rudder/api/status"
	"github.com/rudder-operator/rudder/internal/plan"
	"github.com/rudder-operator/rudder/internal/records"
	"github.com/rudder-operator/rudder/internal/release"
)

// The types a pass's steps speak in, which every other file of the pass builds on: an action
// and its result, the outcome the pass folds the results into, and what they carry (a
// condition, an Event's note, what status.release learns, the release as observed).

// An action is one thing a pass does to a release, or to the objects of its revision
// (reapply). It does that one thing and says how it went, as data: what follows is plan.Next's
// to decide, and what the CR is told is report's (report.go).
type action interface {
	// name names the action: its Events, its metric label, its key in plan.Situation.Taken.
	name() plan.Action
	run(ctx context.Context, e *env, obs observed) result
}

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
	// reads storage).
	after *observed
	// made is the revision an install or upgrade made, and objects what Helm's client knew of
	// its objects (see helm.Request.Objects).
	made    *release.Release
	objects []*unstructured.Unstructured
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

// step is an action a pass took and its result.
type step struct {
	action action
	result result
}

// maxSteps bounds the actions of one pass, beyond the rule that each is taken at most once.
const maxSteps = 12

// phase is what a pass ended in; it is also the value of the rudder_release_state gauge.
type phase string

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

// outcome is what a pass found and did, for report: the steps it took, folded as they came
// (add), and the result it ended on (end).
type outcome struct {
	// phase: "" when the pass failed before it knew the release (report says Failed).
	phase phase
	// reason and message say why the pass ended as it did (Stalled, Failed, Locked, Held), and
	// name the settled reason of Stalled=False otherwise.
	reason, message string
	// err fails the pass: retried with back-off (or, with phaseStalled, never).
	err error
	// released is the new Released (nil: unchanged), conditions the other types the steps
	// set, by type.
	released   *condition
	conditions map[string]*condition
	events     []note
	requeue    time.Duration

	// steps are the actions the pass took, in order; taken their names, failure the last
	// that failed (nil: none).
	steps   []step
	taken   map[plan.Action]bool
	failure *step
	// records are what status.release learns, in order (see writeRelease).
	records []record
	// nudged: the pass acts on a new reconcile-at or reset-at value (see nudges).
	nudged bool

	// newest is the release's newest revision once the pass's actions ended (ended; nil:
	// none): markRecord writes the release's facts on its record.
	newest *records.Head
	ended  bool
	// The revision the pass ended on (nil: none) and, when decoded, its release.
	head *records.Head
	rel  *release.Release
	// applied: Helm applied every object of head just now (an install or upgrade), creating
	// missing ones and merging edited ones back; made are then their identities, when Helm's
	// client knew them (see helm.Request.Objects).
	applied bool
	made    []*unstructured.Unstructured
	// objects is head's parsed manifest — whole when this pass parsed it, else the objects'
	// identities — and ready what kstatus makes of the live objects (nil: the pass did not
	// look).
	objects []*unstructured.Unstructured
	whole   bool
	// serverSide: head applies server-side, when the pass parsed its objects whole.
	serverSide bool
	ready      *readiness
}

// readiness is kstatus's view of a revision's live objects.
type readiness struct {
	revision, count int
	failed, waiting []string
}

func stalled(reason, msg string) *outcome {
	o := &outcome{}
	o.stall(reason, msg)
	return o
}

func retried(reason string, err error) *outcome {
	o := &outcome{}
	o.fail(reason, err)
	return o
}

func hookFailed(which string, err error) *outcome {
	o := &outcome{}
	o.hookFailed(which, err)
	return o
}

// add folds the result of a step (a nil action: the end of the pass) into the outcome.
func (o *outcome) add(a action, res result) {
	if a != nil {
		if o.taken == nil {
			o.taken = map[plan.Action]bool{}
		}
		o.taken[a.name()] = true
		o.steps = append(o.steps, step{a, res})
		if res.verdict == failed {
			o.failure = &o.steps[len(o.steps)-1]
		}
	}
	o.events = append(o.events, res.notes...)
	if res.released != nil {
		o.released = res.released
	}
	for typ, c := range res.conditions {
		if o.conditions == nil {
			o.conditions = map[string]*condition{}
		}
		o.conditions[typ] = c
	}
	o.records = append(o.records, res.record)
	o.requeueIn(res.requeue)
}

// last is the step the pass took last (nil: none).
func (o *outcome) last() *step {
	if len(o.steps) == 0 {
		return nil
	}
	return &o.steps[len(o.steps)-1]
}

// madeStep is the install or upgrade of the pass that made a revision (nil: none).
func (o *outcome) madeStep() *step {
	for i := range o.steps {
		if o.steps[i].result.made != nil {
			return &o.steps[i]
		}
	}
	return nil
}

// end makes res the result the pass ends on.
func (o *outcome) end(res result) {
	switch {
	case res.verdict == retry:
		o.fail(res.reason, res.err)
		if res.forbidden {
			o.phase = phaseFailed
		}
	case res.verdict == blocked && res.requeue > 0:
		o.phase, o.reason, o.message = cmp.Or(res.phase, phaseLocked), res.reason, res.message
	case res.verdict == failed || res.verdict == blocked:
		o.phase, o.reason, o.message, o.err = phaseStalled, res.reason, res.message, nil
	default:
		o.phase, o.reason, o.message = res.phase, res.reason, res.message
	}
	if res.head != nil {
		o.head, o.rel = res.head, res.rel
	}
	if res.made != nil {
		o.applied, o.made = true, res.objects
	}
}

// endOn ends the pass on res, a result no action returned (the end of the pass).
func (o *outcome) endOn(res result) {
	o.add(nil, res)
	o.end(res)
}

// hookFailed fails the pass on a Go hook's error, keeping what the pass did before; which
// names the hook: its phase and its Go type (hooks have no other name).
func (o *outcome) hookFailed(which string, err error) {
	msg := fmt.Sprintf("%s: %v", which, err)
	o.note(corev1.EventTypeWarning, rstatus.ReasonHookFailed, "Hook", msg)
	o.fail(rstatus.ReasonHookFailed, errors.New(msg))
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

// observed is the release as a pass found it.
type observed struct {
	// head is the newest revision (nil: none).
	head *records.Head
	// rel is the decoded newest revision when storage was read (nil when the cache decided).
	rel *release.Release
	// state is what the release needs, decided once per read by records.DetermineState.
	state records.State
	// assumed: nothing was read. Neither the cache nor the CR's status knows a release, so it
	// is taken to be absent; Helm's install checks the name in storage before it writes.
	assumed bool
}
