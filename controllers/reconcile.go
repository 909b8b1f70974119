package controllers

import (
	"context"
	"fmt"
	"slices"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/rudder-operator/rudder/internal/helm"
	"github.com/rudder-operator/rudder/internal/machine"
	"github.com/rudder-operator/rudder/internal/records"
)

// Reconcile is thin: get → deletion → finalizer → pass → one status patch.
//
// If the returned error is non-nil the Result is ignored and the request is retried with
// back-off; a reconcile.TerminalError is not retried (the CR says why on Stalled).
func (r *Reconciler) Reconcile(ctx context.Context, req reconcile.Request) (result reconcile.Result, retErr error) {
	// ctx carries controller-runtime's logger, which names the controller, the CR and the
	// reconcileID; lines about the release add it.
	start := r.opts.Clock.Now()
	var seen *unstructured.Unstructured
	defer func() {
		observeReconcile(r.gvkLabel(), r.opts.Clock.Since(start), retErr)
		if r.opts.OnPass != nil {
			r.opts.OnPass(r.gvk, seen)
		}
	}()

	// The cache's own object, read-only: the pass works on a copy, and the status it read is
	// the cache's (or the one read in its place), compared with what the pass makes of it.
	cached := &unstructured.Unstructured{}
	cached.SetGroupVersionKind(r.gvk)
	if err := r.opts.Client.Get(ctx, req.NamespacedName, cached, client.UnsafeDisableDeepCopy); err != nil {
		if apierrors.IsNotFound(err) {
			r.forget(req.NamespacedName)
		}
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	obj := passCopy(cached)
	obj.SetGroupVersionKind(r.gvk)
	read := cached.Object["status"]
	// A status this process wrote that the cache does not show yet is read in its place.
	if written, ok := r.statuses.read(obj); ok {
		read = written
	}
	seen = obj
	ctx, leave, err := r.gate.Enter(ctx, req.NamespacedName)
	if err != nil {
		return reconcile.Result{}, err
	}
	defer leave()
	// Each release record the pass reads is read once, what it writes is what it reads after.
	ctx = records.WithMemo(ctx)
	if obj.GetDeletionTimestamp() != nil {
		return finalizers{r}.finalize(ctx, obj)
	}
	takenOn := controllerutil.AddFinalizer(obj, Finalizer)
	if takenOn {
		if err := (finalizers{r}).patch(ctx, obj); err != nil {
			return r.conflicted(req.NamespacedName, obj, err)
		}
	}

	defer func() {
		if c := r.coord.Load(); c != nil && c.active.Load() {
			c.wake() // the CR's status may open the gate of a wave
		}
	}()
	res, err := machine.Run(ctx, r.world, obj, machine.Found{Status: read, TakenOn: takenOn})
	if err == nil {
		err = finalizers{r}.replaceForeign(ctx, obj)
	}
	return res, err
}

// passCopy is the pass's copy of the cache's object: a deep copy, but for status.inventory,
// which it shares. Nothing changes an inventory in place: the pass reads it, and its status
// patch replaces it whole (machine's persist), so an idle pass copies none of a large
// release's entries.
func passCopy(cached *unstructured.Unstructured) *unstructured.Unstructured {
	obj := &unstructured.Unstructured{Object: make(map[string]any, len(cached.Object))}
	for k, v := range cached.Object {
		st, ok := v.(map[string]any)
		if k != "status" || !ok {
			obj.Object[k] = runtime.DeepCopyJSONValue(v)
			continue
		}
		cp := make(map[string]any, len(st))
		for sk, sv := range st {
			if sk == "inventory" {
				cp[sk] = sv
				continue
			}
			cp[sk] = runtime.DeepCopyJSONValue(sv)
		}
		obj.Object[k] = cp
	}
	return obj
}

// replaceForeign drops the finalizers operator-sdk's and HOP's helm-operators put on
// a CR (helm.ForeignFinalizers) once its release is rudder's — adopted: the cache of release
// records shows it with the CR as its owner — so that deleting the CR waits for rudder's
// finalizer alone. A CR without them costs nothing; one whose release is not rudder's keeps
// them (they are the other operator's).
func (f finalizers) replaceForeign(ctx context.Context, obj *unstructured.Unstructured) error {
	r := f.r
	before := obj.GetFinalizers()
	after := slices.DeleteFunc(slices.Clone(before), func(f string) bool { return slices.Contains(helm.ForeignFinalizers, f) })
	if len(after) == len(before) {
		return nil
	}
	name, err := r.opts.Watch.ReleaseNameOf(obj)
	if err != nil {
		return nil
	}
	h, err := r.world.Helm.History.Head(ctx, r.opts.Watch.Scope(obj, r.opts.DefaultServiceAccount), name)
	if err != nil || h == nil || h.OwnerUID != string(obj.GetUID()) {
		return err
	}
	obj.SetFinalizers(after)
	if err := f.patch(ctx, obj); err != nil && !apierrors.IsConflict(err) {
		return fmt.Errorf("replacing the finalizers %v of the other helm-operator: %w", before, err)
	}
	// On a conflict the CR changed since the cache read it: its next pass replaces them.
	return nil
}
