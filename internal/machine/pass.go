package machine

import (
	"context"
	"errors"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	rstatus "github.com/rudder-operator/rudder/api/status"
	"github.com/rudder-operator/rudder/internal/plan"
	"github.com/rudder-operator/rudder/internal/records"
)

// A pass is one reconcile of one CR (Run): a pipeline of steps, each a type of its own that
// takes what it needs and hands on a value.
//
//   - the observer (observe.go, with rollout.go and facts.go) reads what the pass decides
//     from, once: the chart, the values, the Go hooks' word, where a rollout leaves the CR,
//     and the release's newest revision with its facts; it returns the observation, which no
//     later step changes;
//   - the actor (actions.go) walks plan.Next's choices: each situation (situation.go) is built
//     from the observation and the release as the last action left it, which the observer
//     reads; each action returns its result as a value, folded into the outcome (outcome.go);
//     the walk ends on how plan.Next says the pass ends (ending.go);
//   - the settler (objects.go) looks at the objects of the revision the pass ended on: drift,
//     restored by another walk of the actor, readiness, the post-release hooks;
//   - the reporter (report.go, record.go) turns the outcome into conditions,
//     observedGeneration, status.release, Events, the rudder_release_state gauge and the
//     controller-runtime Result: the only step that sets a condition.
//
// Between the settler and the reporter the pass writes the release's facts on its newest
// record (markRecord), and after them the status (persist.go).

// Found is what the controller found of a CR, besides the copy a pass works on.
type Found struct {
	// Status is the CR's status as found (the cache's, or the one this process wrote, read in
	// its place): shared, never changed. The pass reports from it (what changed, a failure's
	// message no label holds); it decides nothing.
	Status any
	// TakenOn: the controller added rudder's finalizer for this pass. A pass acts on a
	// release only once the finalizer is written, so no pass acted before this one: unless
	// the cache of records shows a revision, the release is taken to be absent without a read
	// of storage (observed.assumed).
	TakenOn bool
}

// Run is one pass over obj, a CR of w's watch that is not being deleted and holds rudder's
// finalizer: observe, act, settle, report, then one patch of its status when the pass changed
// it. found is what the controller found of obj besides it; obj is the pass's own copy. It ends
// with ctx: a CR deleted or rudder stopping cancels whatever the pass runs.
func Run(ctx context.Context, w *World, obj *unstructured.Unstructured, found Found) (res reconcile.Result, err error) {
	sub := newSubject(ctx, w, obj)
	sub.takenOn = found.TakenOn
	st := sub.written()
	obs := &observation{}
	ob := &observer{sub: sub, obs: obs}
	out := ob.observe(ctx)
	ac := &actor{sub: sub, ob: ob, obs: obs}
	defer func() {
		ac.turn.giveBack(w, sub.key)
		if perr := persist(ctx, sub, found.Status, &st); perr != nil {
			err = errors.Join(err, perr)
		}
	}()
	if out == nil {
		out = ac.act(ctx)
	}
	if out.settles() {
		settler{sub, obs.relName}.settle(ctx, out, ac.restore)
	}
	if err := markRecord(ctx, ob, obs, out); err != nil {
		// The next pass would not know what this one learned: it is retried, whatever it
		// ended on.
		out.phase = ""
		out.fail(rstatus.ReasonReconcileError, err)
	}
	return reporter{sub, obs, &st}.report(out)
}

// markRecord writes the release's facts, as the pass leaves them, on the newest revision's
// record, when it does not carry them already: the pass's status is written after it, and
// reports what the record holds. A release that is not the CR's (another owner's), and one
// another operation holds (pending), are not written; the facts of a release without a
// record (an install refused before Helm stored anything) are kept in Memory, where the next
// pass reads them (factsOf).
func markRecord(ctx context.Context, ob *observer, obs *observation, o *outcome) error {
	sub, w := ob.sub, ob.sub.w
	h := o.newest
	if !o.ended && len(o.steps) > 0 {
		// The actions did not end (a look at the history after one failed): the newest
		// revision as the cache of records shows it, with what this process wrote.
		var err error
		if h, err = ob.newest(ctx); err != nil {
			return err
		}
	}
	if h == nil {
		w.Memory.keepUnrecorded(sub.key, sub.obj.GetUID(), factsAfter(obs.facts, o), failureMessageAfter(obs.heldBack, o))
		return nil
	}
	w.Memory.forgetUnrecorded(sub.key)
	if h.OwnerUID != obs.want.OwnerUID || h.Pending() {
		return nil
	}
	f := factsAfter(obs.facts, o)
	if h.Facts != nil && h.Facts.Of == h.Revision && h.Facts.Equal(&f) {
		return nil
	}
	if err := w.Helm.Records.WriteFacts(ctx, sub.scope, obs.relName, h.Revision, f); err != nil {
		if apierrors.IsNotFound(err) {
			return nil // gone meanwhile (an uninstall): no record to keep them on
		}
		return err
	}
	f.Of = h.Revision
	h.Facts = &f
	return nil
}

// Uninstall takes the actions plan.Next chooses for release name of obj, a deleted CR, until
// the release is gone or is not the CR's to remove, and records their Events; obj's status is
// not written. An error is retried with back-off.
func Uninstall(ctx context.Context, w *World, obj *unstructured.Unstructured, name string) error {
	sub := newSubject(ctx, w, obj)
	obs := &observation{relName: name, want: records.Desired{OwnerUID: string(obj.GetUID())}}
	ob := &observer{sub: sub, obs: obs}
	rel, err := ob.readRelease(ctx, true)
	if err != nil {
		return err
	}
	ac := &actor{sub: sub, ob: ob, obs: obs}
	o := &outcome{}
	defer func() {
		for _, n := range o.events {
			sub.event(n, name)
		}
	}()
	keep := strings.TrimSpace(obj.GetAnnotations()[AnnotationOnDelete]) == "keep"
	deleting := func(_ context.Context, rel observed, o *outcome) (observed, plan.Situation, error) {
		return rel, plan.Situation{Deleting: true, Keep: keep, State: rel.state, Taken: o.taken}, nil
	}
	st := ac.walk(ctx, course{situate: deleting}, rel, o)
	switch {
	case st.err != nil:
		return st.err
	case st.res != nil:
		return st.res.err
	case st.how == plan.EndGone && st.rel.state == records.StateConflict:
		sub.log.Info("release belongs to another owner; leaving it", "release", name)
	}
	return nil
}
