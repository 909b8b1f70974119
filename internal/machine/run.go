package machine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	rstatus "github.com/rudder-operator/rudder/api/status"
	"github.com/rudder-operator/rudder/internal/plan"
	"github.com/rudder-operator/rudder/internal/records"
)

// A pass from start to end: Run takes the steps (pass.run) and then writes what they made of
// the CR's status (persist), once. Uninstall is the pass over a deleted CR: the actor alone.

// Run is one pass over obj, a CR of w's watch that is not being deleted and holds rudder's
// finalizer: observe, act, report, then one patch of its status when the pass changed it.
// read is what the controller found of obj besides it; obj is the pass's own copy. It ends
// with ctx: a CR deleted or rudder stopping cancels whatever the pass runs.
func Run(ctx context.Context, w *World, obj *unstructured.Unstructured, read Read) (res reconcile.Result, err error) {
	p := newPass(ctx, w, obj, read)
	ac := &actor{observation: p.observation}
	defer func() {
		ac.endTurn()
		if perr := p.persist(ctx); perr != nil {
			err = errors.Join(err, perr)
		}
	}()
	return p.run(ctx, ac)
}

// run is the pass: observe, act (and settle), report. A pass ends in observe when there is
// nothing to act on (paused, values that do not render, a failed pre-release hook).
func (p *pass) run(ctx context.Context, ac *actor) (reconcile.Result, error) {
	out := (&observer{p.observation}).observe(ctx)
	if out == nil {
		out = ac.act(ctx)
	}
	if out.settles() {
		(&settler{ac}).settle(ctx, out)
	}
	if err := p.markRecord(ctx, out); err != nil {
		// The next pass would not know what this one learned: it is retried, whatever it
		// ended on.
		out.phase = ""
		out.fail(rstatus.ReasonReconcileError, err)
	}
	return (&reporter{p.observation, &p.st}).report(out)
}

// markRecord writes the release's facts, as the pass leaves them, on the newest revision's
// record, when it does not carry them already: the pass's status is written after it, and
// reports what the record holds. A release that is not the CR's (another owner's), and one
// another operation holds (pending), are not written; the facts of a release without a
// record (an install refused before Helm stored anything) are kept in Memory, where the next
// pass reads them (factsOf).
func (p *pass) markRecord(ctx context.Context, o *outcome) error {
	h := o.newest
	if !o.ended && len(o.steps) > 0 {
		// The actions did not end (a look at the history after one failed): the newest
		// revision as the cache of records shows it, with what this process wrote.
		var err error
		if h, err = p.w.Helm.Head(ctx, p.scope, p.relName); err != nil {
			return err
		}
	}
	if h == nil {
		f, msg := p.factsAfter(o), p.failureMessageAfter(o)
		p.w.Memory.keepUnrecorded(p.key, p.obj.GetUID(), f, msg)
		return nil
	}
	p.w.Memory.forgetUnrecorded(p.key)
	if h.OwnerUID != p.want.OwnerUID || h.Pending() {
		return nil
	}
	f := p.factsAfter(o)
	if h.Facts != nil && h.Facts.Of == h.Revision && h.Facts.Equal(&f) {
		return nil
	}
	if err := p.w.Helm.WriteFacts(ctx, p.scope, p.relName, h.Revision, f); err != nil {
		if apierrors.IsNotFound(err) {
			return nil // gone meanwhile (an uninstall): no record to keep them on
		}
		return err
	}
	f.Of = h.Revision
	h.Facts = &f
	return nil
}

// conditionsEdited reports whether the pass's hooks changed status.conditions of the CR (a
// kind without hooks has nothing to compare).
func (p *pass) conditionsEdited() bool {
	if len(p.w.Hooks.PreReleaseHooks(p.w.gvk()))+len(p.w.Hooks.PostReleaseHooks(p.w.gvk())) == 0 {
		return false
	}
	orig, _ := p.origStatus.(map[string]any)
	cur, _, _ := unstructured.NestedFieldNoCopy(p.obj.Object, "status", "conditions")
	return !jsonEqual(orig["conditions"], cur)
}

// keepHookConditions takes into rudder's status the conditions of the types hooks own, as the
// hooks left them in the CR: set, changed or removed.
func (p *pass) keepHookConditions() {
	var edited []metav1.Condition
	for _, c := range rstatus.ConditionsOf(p.obj) {
		if !rstatus.RudderOwns(c.Type) {
			edited = append(edited, c)
		}
	}
	for _, c := range slices.Clone(p.st.Conditions) {
		if !rstatus.RudderOwns(c.Type) && !slices.ContainsFunc(edited, func(e metav1.Condition) bool { return e.Type == c.Type }) {
			meta.RemoveStatusCondition(&p.st.Conditions, c.Type)
		}
	}
	for _, c := range edited {
		meta.SetStatusCondition(&p.st.Conditions, c)
	}
}

// persist writes the status with one merge patch, and only when something changed.
func (p *pass) persist(ctx context.Context) error {
	// Conditions are rudder's and the hooks': a hook owns the types rudder does not
	// (rstatus.RudderOwns), and its edits of those are kept, its edits of rudder's are not.
	hooksEdited := p.conditionsEdited()
	if hooksEdited {
		p.keepHookConditions()
	}
	// Most passes change nothing of rudder's part: then it needs no conversion (the hooks may
	// still have edited the rest of the status).
	if hooksEdited || !equality.Semantic.DeepEqual(p.read, p.st) {
		st, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&p.st)
		if err != nil {
			return err
		}
		cur, _, _ := unstructured.NestedMap(p.obj.Object, "status")
		if cur == nil {
			cur = map[string]any{}
		}
		for _, k := range []string{"conditions", "observedGeneration", "release"} {
			if v, ok := st[k]; ok {
				cur[k] = v
			} else {
				delete(cur, k)
			}
		}
		p.obj.Object["status"] = cur
	}
	cur := p.obj.Object["status"]
	// Most passes change nothing: compare before marshalling anything.
	if jsonEqual(p.origStatus, cur) {
		return nil
	}
	before, _ := p.origStatus.(map[string]any)
	after, _ := cur.(map[string]any)
	patch := mergePatch(before, after)
	if len(patch) == 0 {
		return nil
	}
	data, err := json.Marshal(map[string]any{"status": patch})
	if err != nil {
		return err
	}
	statusWrites.WithLabelValues(p.w.label()).Inc()
	return client.IgnoreNotFound(p.w.Status.PatchStatus(ctx, p.obj, data))
}

// Uninstall takes the actions plan.Next chooses for release name of obj, a deleted CR, until
// the release is gone or is not the CR's to remove, and records their Events; obj's status is
// not written. An error is retried with back-off.
func Uninstall(ctx context.Context, w *World, obj *unstructured.Unstructured, name string) error {
	ob := &observation{subject: newSubject(ctx, w, obj), relName: name}
	ob.want.OwnerUID = string(obj.GetUID())
	return (&actor{observation: ob}).uninstall(ctx)
}

// uninstall takes the actions plan.Next chooses for a deleted CR's release until it is gone,
// recording their Events; an error is retried with back-off.
func (ac *actor) uninstall(ctx context.Context) error {
	rel, err := ac.w.Helm.Last(ctx, ac.scope, ac.relName)
	if err != nil {
		return fmt.Errorf("reading release %s: %w", ac.relName, err)
	}
	h := records.HeadOf(rel)
	obs := observed{head: h, rel: rel, state: records.DetermineState(h, ac.want)}
	o := &outcome{}
	defer func() {
		for _, n := range o.events {
			ac.event(n)
		}
	}()
	keep := strings.TrimSpace(ac.obj.GetAnnotations()[AnnotationOnDelete]) == "keep"
	for range maxSteps {
		c, end := plan.Next(plan.Situation{Deleting: true, Keep: keep, State: obs.state, Taken: o.taken})
		if c.None() {
			if end == plan.EndGone && obs.state == records.StateConflict {
				ac.log.Info("release belongs to another owner; leaving it", "release", ac.relName)
			}
			return nil
		}
		res := ac.take(ctx, c, obs, o)
		if res.verdict != succeeded {
			return res.err
		}
		if obs, err = ac.after(ctx, res); err != nil {
			return err
		}
	}
	return fmt.Errorf("release %s: more than %d actions to uninstall it", ac.relName, maxSteps)
}
