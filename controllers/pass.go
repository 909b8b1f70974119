package controllers

import (
	"context"
	"encoding/json"
	"slices"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	rstatus "github.com/rudder-operator/rudder/api/status"
	"github.com/rudder-operator/rudder/internal/chartsource"
	"github.com/rudder-operator/rudder/internal/helm"
	"github.com/rudder-operator/rudder/internal/hook"
	"github.com/rudder-operator/rudder/internal/records"
)

// A pass is one reconcile of one CR, in three steps:
//
//   - observe (observe.go) reads what the pass decides from: the chart, the values, the Go
//     hooks' word, and the release's newest revision, read once and classified once by
//     records.DetermineState;
//   - act (actions.go) takes the actions that state calls for, one at a time, each chosen by
//     plan.Next from the state and what the previous action left, until it says how
//     the pass ends; then, on a revision, settle looks at its objects (objects.go), restoring
//     drift (the reapply action) and computing their readiness;
//   - report (report.go) turns the steps' results into conditions, observedGeneration,
//     status.release (record.go), the rudder_release_state gauge, Events and the
//     controller-runtime Result. It is the only place that sets a condition or writes
//     status.release.
type pass struct {
	r   *Reconciler
	obj *unstructured.Unstructured
	// origStatus is the CR's status as read, to patch only what the pass changed; origCommon
	// is rudder's part of it as parsed.
	origStatus any
	origCommon rstatus.Common
	// log names the CR (controller-runtime's keys); lines add the release.
	log logr.Logger
	key types.NamespacedName
	gen int64
	// st is the status the pass writes: report alone sets it, from the steps' results.
	st rstatus.Common
	// scope is who acts for the release (rudder, or the tenant's ServiceAccount) and where.
	scope helm.Scope

	// What observe found.
	snap     *chartsource.Snapshot
	chartErr error // the chart on disk fails to load; snap is the last good version
	// chartDigest is what the release is made from: snap's digest with the watch's layers
	// (watches.Watch.ChartDigest); want.ChartDigest is its label form.
	chartDigest string
	relName     string
	values      map[string]any
	overridden  []string // watches.yaml overrideValues keys applied on top of the spec
	want        records.Desired
	held        *hook.Decision // a pre-release hook said "not now"
	release     observed

	// acting: the pass holds one of its namespace's action slots (see gate).
	acting bool
	// queued: the pass found its namespace's action slots taken and waits its turn.
	queued bool
	// reset: the pass acts on a new reset-at value (see nudges).
	reset bool
	// pin is where the watch's rollouts leave the CR (see rollout.go).
	pin pin
	// ev is the environment of the pass's actions (see env).
	ev *env
	// known are the release's facts as the pass found them (see facts); out is the outcome
	// its actions fold into (nil before act).
	known *records.Facts
	out   *outcome
}

// newPass is the pass over obj. read is obj's status as the pass found it (the cache's, or
// the one this process wrote, read in its place): shared, never changed; obj holds a copy.
func newPass(r *Reconciler, obj *unstructured.Unstructured, read any) *pass {
	p := &pass{r: r, obj: obj, origStatus: read, key: client.ObjectKeyFromObject(obj),
		gen: obj.GetGeneration(), scope: r.scope(obj)}
	p.st.Conditions = rstatus.ConditionsOf(obj)
	p.st.ObservedGeneration, _, _ = unstructured.NestedInt64(obj.Object, "status", "observedGeneration")
	if m, ok, _ := unstructured.NestedMap(obj.Object, "status", "release"); ok {
		var rel rstatus.Release
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(m, &rel); err == nil {
			p.st.Release = &rel
		}
	}
	p.origCommon = *p.st.DeepCopy()
	return p
}

// run is the pass: observe, act, report. A pass ends in observe when there is nothing to act
// on (paused, values that do not render, a failed pre-release hook).
func (p *pass) run(ctx context.Context) (reconcile.Result, error) {
	p.log = logr.FromContextOrDiscard(ctx)
	out := p.observe(ctx)
	if out == nil {
		out = p.act(ctx)
	}
	if out.settles() {
		p.settle(ctx, out)
	}
	if err := p.markRecord(ctx, out); err != nil {
		// The next pass would not know what this one learned: it is retried, whatever it
		// ended on.
		out.phase = ""
		out.fail(rstatus.ReasonReconcileError, err)
	}
	return p.report(out)
}

// cond is a condition as the CR had it when the pass read it (report has not run yet) or as
// report set it.
func (p *pass) cond(typ string) *metav1.Condition {
	return meta.FindStatusCondition(p.st.Conditions, typ)
}

// conditionsEdited reports whether the pass's hooks changed status.conditions of the CR (a
// kind without hooks has nothing to compare).
func (p *pass) conditionsEdited() bool {
	if len(p.r.opts.Hooks.PreReleaseHooks(p.r.gvk))+len(p.r.opts.Hooks.PostReleaseHooks(p.r.gvk)) == 0 {
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
	if hooksEdited || !equality.Semantic.DeepEqual(p.origCommon, p.st) {
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
	statusWrites.WithLabelValues(p.r.gvkLabel()).Inc()
	// The pass is over: of the CR the API server sends back, only its metadata is read.
	res := p.r.metadataOf(p.key)
	if err := p.r.opts.Client.Status().Patch(ctx, res, client.RawPatch(types.MergePatchType, data)); err != nil {
		return client.IgnoreNotFound(err)
	}
	p.r.statuses.wrote(p.key, p.obj.GetUID(), res.GetResourceVersion(), cur, p.obj.GetFinalizers())
	return nil
}
