package machine

import (
	"cmp"
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

// The outcome of a pass: its steps' results folded as they came, and the result it ended on.
// The actor folds into it, the settler adds what the objects say, and the reporter turns it
// into the status.

// step is an action a pass took and its result.
type step struct {
	action action
	result result
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
	// rendered are the made objects whole, as Helm sent them.
	rendered []*unstructured.Unstructured
	// objects is head's parsed manifest — whole when this pass parsed it, else the objects'
	// identities — and ready what kstatus makes of the live objects (nil: the pass did not
	// look).
	objects []*unstructured.Unstructured
	whole   bool
	// serverSide: head applies server-side, when the pass parsed its objects whole.
	serverSide bool
	ready      *readiness
}

// sent is want as the action that made o's head sent it (nil: none did this pass). made and
// rendered are the post-render's identities and objects, one for one: an identity carries the
// namespace the object goes to, which the rendered object may leave to the release.
func (o *outcome) sent(want *unstructured.Unstructured) *unstructured.Unstructured {
	if !o.applied || len(o.rendered) != len(o.made) {
		return nil
	}
	for i, id := range o.made {
		if id.GetName() == want.GetName() && id.GetNamespace() == want.GetNamespace() && id.GroupVersionKind() == want.GroupVersionKind() {
			return o.rendered[i]
		}
	}
	return nil
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
		o.applied, o.made, o.rendered = true, res.objects, res.rendered
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

// stall ends the pass on something only a change to the CR, the chart or the cluster can
// clear; Released says the same.
func (o *outcome) stall(reason, msg string) {
	o.phase, o.reason, o.message, o.err = phaseStalled, reason, msg, nil
	o.released = &condition{metav1.ConditionFalse, reason, msg}
}

// fail ends the pass on a transient failure: retried with back-off.
func (o *outcome) fail(reason string, err error) {
	o.reason, o.message, o.err = reason, err.Error(), err
}

func (o *outcome) note(typ, reason, action, msg string) {
	o.events = append(o.events, note{typ: typ, reason: reason, action: action, message: msg})
}

func (o *outcome) requeueIn(d time.Duration) {
	if d > 0 && (o.requeue == 0 || d < o.requeue) {
		o.requeue = d
	}
}

// settles reports whether the pass goes on to the release's objects and the post-release
// hooks: it ended on a revision (or a hold) without failing.
func (o *outcome) settles() bool {
	return o.err == nil && (o.phase == phaseInSync || o.phase == phaseRolledBack || o.phase == phaseHeld)
}

// recordedFailure is the failure this pass recorded last (nil: none).
func (o *outcome) recordedFailure() *failure {
	for i := len(o.records) - 1; i >= 0; i-- {
		if f := o.records[i].failed; f != nil {
			return f
		}
	}
	return nil
}

// failed is the action whose failure this pass met ("": none).
func (o *outcome) failed() plan.Action {
	if o.failure == nil {
		return ""
	}
	return o.failure.action.name()
}

// rolledBackOnRequest reports whether this pass rolled the release back as rollback-to asks.
func (o *outcome) rolledBackOnRequest() bool {
	for _, s := range o.steps {
		if s.action.name() == plan.RequestRollback && s.result.verdict == succeeded && s.result.after == nil {
			return true
		}
	}
	return false
}
