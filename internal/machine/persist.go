package machine

import (
	"context"
	"encoding/json"
	"slices"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	rstatus "github.com/rudder-operator/rudder/api/status"
)

// The end of a pass: the status the reporter made, with the conditions the Go hooks own as
// they left them, written with one merge patch when it changed.

// conditionsEdited reports whether the pass's hooks changed status.conditions of sub's CR from
// orig, the status as read (a kind without hooks has nothing to compare).
func conditionsEdited(sub *subject, orig any) bool {
	if len(sub.w.Hooks.PreReleaseHooks(sub.w.gvk()))+len(sub.w.Hooks.PostReleaseHooks(sub.w.gvk())) == 0 {
		return false
	}
	was, _ := orig.(map[string]any)
	cur, _, _ := unstructured.NestedFieldNoCopy(sub.obj.Object, "status", "conditions")
	return !jsonEqual(was["conditions"], cur)
}

// keepHookConditions takes into st the conditions of the types hooks own, as the hooks left
// them in sub's CR: set, changed or removed.
func keepHookConditions(sub *subject, st *rstatus.Common) {
	var edited []metav1.Condition
	for _, c := range rstatus.ConditionsOf(sub.obj) {
		if !rstatus.RudderOwns(c.Type) {
			edited = append(edited, c)
		}
	}
	for _, c := range slices.Clone(st.Conditions) {
		if !rstatus.RudderOwns(c.Type) && !slices.ContainsFunc(edited, func(e metav1.Condition) bool { return e.Type == c.Type }) {
			meta.RemoveStatusCondition(&st.Conditions, c.Type)
		}
	}
	for _, c := range edited {
		meta.SetStatusCondition(&st.Conditions, c)
	}
}

// persist writes st, the status a pass made of sub's CR, with one merge patch from orig, the
// status as read, and only when something changed.
func persist(ctx context.Context, sub *subject, orig any, st *rstatus.Common) error {
	// Conditions are rudder's and the hooks': a hook owns the types rudder does not
	// (rstatus.RudderOwns), and its edits of those are kept, its edits of rudder's are not.
	hooksEdited := conditionsEdited(sub, orig)
	if hooksEdited {
		keepHookConditions(sub, st)
	}
	// Most passes change nothing of rudder's part: then it needs no conversion (the hooks may
	// still have edited the rest of the status).
	if hooksEdited || !equality.Semantic.DeepEqual(sub.read, *st) {
		u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(st)
		if err != nil {
			return err
		}
		cur, _, _ := unstructured.NestedMap(sub.obj.Object, "status")
		if cur == nil {
			cur = map[string]any{}
		}
		for _, k := range []string{"conditions", "observedGeneration", "release", "inventory"} {
			if v, ok := u[k]; ok {
				cur[k] = v
			} else {
				delete(cur, k)
			}
		}
		sub.obj.Object["status"] = cur
	}
	cur := sub.obj.Object["status"]
	// Most passes change nothing: compare before marshalling anything.
	if jsonEqual(orig, cur) {
		return nil
	}
	before, _ := orig.(map[string]any)
	after, _ := cur.(map[string]any)
	patch := mergePatch(before, after)
	if len(patch) == 0 {
		return nil
	}
	data, err := json.Marshal(map[string]any{"status": patch})
	if err != nil {
		return err
	}
	statusWrites.WithLabelValues(sub.w.label()).Inc()
	return client.IgnoreNotFound(sub.w.Status.PatchStatus(ctx, sub.obj, data))
}
