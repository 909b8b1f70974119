package machine

import (
	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

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
	w   *World
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
func newPass(w *World, obj *unstructured.Unstructured, read any) *pass {
	p := &pass{w: w, obj: obj, origStatus: read, key: client.ObjectKeyFromObject(obj),
		gen: obj.GetGeneration(), scope: w.Watch.Scope(obj, w.DefaultServiceAccount)}
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

// cond is a condition as the CR had it when the pass read it (report has not run yet) or as
// report set it.
func (p *pass) cond(typ string) *metav1.Condition {
	return meta.FindStatusCondition(p.st.Conditions, typ)
}
