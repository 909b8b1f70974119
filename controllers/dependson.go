package controllers

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	rstatus "github.com/rudder-operator/rudder/api/status"
	"github.com/rudder-operator/rudder/internal/records"
	"github.com/rudder-operator/rudder/internal/watches"
)

// dependsOnIndex indexes the CRs of a watch with dependsOn by the CRs they depend on
// (watches.Dependency.IndexValue), to find the dependents of a CR that changed.
const dependsOnIndex = "rudder.dev/depends-on"

// Dependencies joins the watches' dependsOn (watches.DependsOn): a pass reads a dependency
// from the cache of its kind through it (machine.Dependencies), and a change of a CR wakes the
// CRs that depend on it (a watch on the dependency's kind, not a poll).
type Dependencies struct {
	client client.Reader
	byGVK  map[schema.GroupVersionKind]*Reconciler
}

// Join gives rs, the Reconcilers of every watch, what their CRs depend on, read through c (the
// manager's cache of CRs). It is called before their SetupWithManager; with no watch that
// has dependsOn it does nothing.
func Join(c client.Reader, rs []*Reconciler) {
	d := &Dependencies{client: c, byGVK: make(map[schema.GroupVersionKind]*Reconciler, len(rs))}
	some := false
	for _, r := range rs {
		d.byGVK[r.gvk] = r
		some = some || len(r.opts.Watch.Ordering().Kinds()) > 0
	}
	if !some {
		return
	}
	for _, r := range rs {
		r.deps, r.world.Dependencies = d, d
	}
}

// Get reads dep from the cache, as it is there: the pass only reads it (nil, nil: there is
// none, or its kind is not served yet).
func (d *Dependencies) Get(ctx context.Context, dep watches.Dependency) (*unstructured.Unstructured, error) {
	obj := CRObject(dep.GVK)
	err := d.client.Get(ctx, types.NamespacedName{Namespace: dep.Namespace, Name: dep.Name}, obj, client.UnsafeDisableDeepCopy)
	if apierrors.IsNotFound(err) || meta.IsNoMatchError(err) {
		return nil, nil
	}
	return obj, err
}

// Of is what obj depends on, as the watch of its kind says.
func (d *Dependencies) Of(obj *unstructured.Unstructured) ([]watches.Dependency, error) {
	r := d.byGVK[obj.GroupVersionKind()]
	if r == nil {
		return nil, nil
	}
	return r.opts.Watch.Ordering().Of(obj)
}

// Behind says why dep is not on the chart of its kind's watch as it is now ("": it is, or it
// has no release yet, which its readiness says).
func (d *Dependencies) Behind(dep *unstructured.Unstructured) string {
	r := d.byGVK[dep.GroupVersionKind()]
	if r == nil {
		return ""
	}
	on, _, _ := unstructured.NestedString(dep.Object, "status", "release", "chartDigest")
	cs, _ := r.opts.Charts.Get(r.opts.Watch.ChartPath())
	if on == "" || cs.Current == nil {
		return ""
	}
	now := r.opts.Watch.ChartDigest(cs.Current.Digest)
	if on == records.LabelDigest(now) {
		return ""
	}
	return fmt.Sprintf("on chart digest %s, and its kind's chart is now %s: its upgrade comes first", records.DisplayDigest(on),
		records.DisplayDigest(now))
}

// dependedOn reports whether a watch's CRs may depend on CRs of kind gvk.
func (d *Dependencies) dependedOn(gvk schema.GroupVersionKind) bool {
	if d == nil {
		return false
	}
	for _, r := range d.byGVK {
		if slices.Contains(r.opts.Watch.Ordering().Kinds(), gvk) {
			return true
		}
	}
	return false
}

// dependents calls each with the CRs that depend on obj, a CR of kind gvk, as the cache of
// each dependent kind holds them, and the Reconciler of their kind. A kind whose controller
// has not started is left out: its first passes read every dependency.
func (d *Dependencies) dependents(ctx context.Context, gvk schema.GroupVersionKind, obj client.Object,
	each func(r *Reconciler, crs []unstructured.Unstructured)) error {
	dep := watches.DependencyOn(gvk, obj)
	for _, r := range d.byGVK {
		if !slices.Contains(r.opts.Watch.Ordering().Kinds(), gvk) || r.startedQueue() == nil {
			continue
		}
		crs := &unstructured.UnstructuredList{}
		crs.SetGroupVersionKind(r.gvk.GroupVersion().WithKind(r.gvk.Kind + "List"))
		err := r.opts.Client.List(ctx, crs, client.MatchingFields{dependsOnIndex: dep.IndexValue()}, client.UnsafeDisableDeepCopy)
		if err != nil {
			return fmt.Errorf("finding the CRs that depend on %s: %w", dep, err)
		}
		each(r, crs.Items)
	}
	return nil
}

// wake queues the CRs that depend on obj, a CR of kind gvk, in their own controllers' queues.
func (d *Dependencies) wake(ctx context.Context, gvk schema.GroupVersionKind, obj client.Object) {
	err := d.dependents(ctx, gvk, obj, func(r *Reconciler, crs []unstructured.Unstructured) {
		for i := range crs {
			r.enqueue(client.ObjectKeyFromObject(&crs[i]))
		}
	})
	if err != nil {
		d.byGVK[gvk].log.Error(err, "waking the CRs that depend on a CR")
	}
}

// wakeDependencies queues the CRs obj, a CR that is gone, depended on: a deletion that waits
// for its dependents (watches.AnnotationDeleteAfterDependents) looks again.
func (d *Dependencies) wakeDependencies(obj client.Object) {
	cr, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return
	}
	deps, _ := d.Of(cr)
	for _, dep := range deps {
		if r := d.byGVK[dep.GVK]; r != nil {
			r.enqueue(types.NamespacedName{Namespace: dep.Namespace, Name: dep.Name})
		}
	}
}

// waitForDependents holds the uninstall of obj, a deleted CR annotated
// watches.AnnotationDeleteAfterDependents, while CRs that depend on it remain, for at most the
// annotation's bound from its deletion: meanwhile its Ready condition names them (one status
// write) and the deletion of each wakes it; after it, it is uninstalled with a Warning Event
// naming what remains. wait is false when the uninstall goes ahead.
func (f finalizers) waitForDependents(ctx context.Context, obj *unstructured.Unstructured) (res reconcile.Result, wait bool, err error) {
	r := f.r
	bound, err := watches.DependentsWait(obj)
	if err != nil {
		r.event(obj, corev1.EventTypeWarning, rstatus.ReasonDependencyInvalid, "Delete", "%s; uninstalling without waiting", err.Error())
		return res, false, nil
	}
	if bound == 0 || r.deps == nil || !r.deps.dependedOn(r.gvk) {
		return res, false, nil
	}
	var remain []string
	if err := r.deps.dependents(ctx, r.gvk, obj, func(d *Reconciler, crs []unstructured.Unstructured) {
		for i := range crs {
			remain = append(remain, watches.DependencyOn(d.gvk, &crs[i]).String())
		}
	}); err != nil {
		return res, false, err
	}
	if len(remain) == 0 {
		return res, false, nil
	}
	slices.Sort(remain)
	names := strings.Join(remain, ", ")
	waited := r.opts.Clock.Since(obj.GetDeletionTimestamp().Time)
	if waited >= bound {
		r.event(obj, corev1.EventTypeWarning, rstatus.ReasonDependentsRemain, "Delete",
			"waited %s for the CRs that depend on it to be deleted; uninstalling while %s remain", bound, names)
		return res, false, nil
	}
	msg := fmt.Sprintf("deleted: waiting up to %s for the CRs that depend on it to be deleted first: %s", bound, names)
	conds := rstatus.ConditionsOf(obj)
	if c := meta.FindStatusCondition(conds, rstatus.TypeReady); c == nil || c.Reason != rstatus.ReasonDependentsRemain || c.Message != msg {
		meta.SetStatusCondition(&conds, metav1.Condition{Type: rstatus.TypeReady, Status: metav1.ConditionFalse,
			Reason: rstatus.ReasonDependentsRemain, Message: msg, ObservedGeneration: obj.GetGeneration()})
		data, err := json.Marshal(map[string]any{"status": map[string]any{"conditions": conds}})
		if err != nil {
			return res, false, err
		}
		if err := (statusWriter{r}).PatchStatus(ctx, obj, data); err != nil {
			return res, false, client.IgnoreNotFound(err)
		}
		r.event(obj, corev1.EventTypeNormal, rstatus.ReasonDependentsRemain, "Delete", "%s", msg)
	}
	return reconcile.Result{RequeueAfter: bound - waited}, true, nil
}

// dependencyWatches adds to bld, the builder of the watch's controller, what its kind's part in
// the watches' dependsOn needs: the index of its CRs by what they depend on, and handlers on its
// own kind that wake the CRs depending on one of its CRs, and what one of its CRs depended on
// once it is gone.
func (ev watchEvents) dependencyWatches(mgr ctrl.Manager, bld *builder.Builder) (*builder.Builder, error) {
	if ev.r.deps == nil {
		return bld, nil
	}
	if len(ev.r.opts.Watch.Ordering().Kinds()) > 0 {
		if err := mgr.GetFieldIndexer().IndexField(context.Background(), CRObject(ev.r.gvk), dependsOnIndex, ev.indexedDependencies); err != nil {
			return nil, fmt.Errorf("indexing %s by what it depends on: %w", ev.r.opts.Watch, err)
		}
		bld = bld.WatchesRawSource(source.Kind[client.Object](mgr.GetCache(), CRObject(ev.r.gvk), ev.wakeDependencies()))
	}
	if ev.r.deps.dependedOn(ev.r.gvk) {
		bld = bld.WatchesRawSource(source.Kind[client.Object](mgr.GetCache(), CRObject(ev.r.gvk), ev.wakeDependents()))
	}
	return bld, nil
}

// indexedDependencies is dependsOnIndex's values for a CR: what it depends on (none when its
// entries are not valid: its pass says why).
func (ev watchEvents) indexedDependencies(o client.Object) []string {
	cr, ok := o.(*unstructured.Unstructured)
	if !ok {
		return nil
	}
	deps, err := ev.r.opts.Watch.Ordering().Of(cr)
	if err != nil || len(deps) == 0 {
		return nil
	}
	out := make([]string, len(deps))
	for i, d := range deps {
		out[i] = d.IndexValue()
	}
	return out
}

// wakeDependents is the handler, on the watch's own kind, that wakes the CRs depending on a
// CR of it when it is created, deleted or changes in any way (its status included: Ready is
// what they wait for). It queues nothing of its own kind.
func (ev watchEvents) wakeDependents() handler.TypedEventHandler[client.Object, reconcile.Request] {
	type queue = workqueue.TypedRateLimitingInterface[reconcile.Request]
	return handler.TypedFuncs[client.Object, reconcile.Request]{
		CreateFunc: func(ctx context.Context, e event.TypedCreateEvent[client.Object], _ queue) {
			ev.r.deps.wake(ctx, ev.r.gvk, e.Object)
		},
		UpdateFunc: func(ctx context.Context, e event.TypedUpdateEvent[client.Object], _ queue) {
			if e.ObjectOld.GetResourceVersion() != e.ObjectNew.GetResourceVersion() {
				ev.r.deps.wake(ctx, ev.r.gvk, e.ObjectNew)
			}
		},
		DeleteFunc: func(ctx context.Context, e event.TypedDeleteEvent[client.Object], _ queue) {
			ev.r.deps.wake(ctx, ev.r.gvk, e.Object)
		},
	}
}

// wakeDependencies is the handler, on a kind whose CRs may depend on others, that wakes what
// a CR of it depended on once it is gone.
func (ev watchEvents) wakeDependencies() handler.TypedEventHandler[client.Object, reconcile.Request] {
	return handler.TypedFuncs[client.Object, reconcile.Request]{
		DeleteFunc: func(_ context.Context, e event.TypedDeleteEvent[client.Object], _ workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			ev.r.deps.wakeDependencies(e.Object)
		},
	}
}
