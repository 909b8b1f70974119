package machine

import (
	"context"
	"encoding/json"
	"errors"
	"slices"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	rstatus "github.com/rudder-operator/rudder/api/status"
)

// A pass from start to end: Run takes the steps (pass.run) and then writes what they made of
// the CR's status (persist), once.

// Run is one pass over obj, a CR of w's watch that is not being deleted and holds rudder's
// finalizer: observe, act, report, then one patch of its status when the pass changed it.
// read is obj's status as the controller found it (the cache's, or the one this process
// wrote, read in its place): shared, never changed; obj is the pass's own copy. It ends with
// ctx: a CR deleted or rudder stopping cancels whatever the pass runs.
func Run(ctx context.Context, w *World, obj *unstructured.Unstructured, read any) (res reconcile.Result, err error) {
	p := newPass(w, obj, read)
	defer func() {
		p.endTurn()
		if perr := p.persist(ctx); perr != nil {
			err = errors.Join(err, perr)
		}
	}()
	return p.run(ctx)
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
	statusWrites.WithLabelValues(p.w.label()).Inc()
	return client.IgnoreNotFound(p.w.Status.PatchStatus(ctx, p.obj, data))
}
