package controllers

import (
	"context"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/rudder-operator/rudder/internal/gate"
	"github.com/rudder-operator/rudder/internal/machine"
)

// finalizers are the Reconciler's writes of a CR's finalizers: rudder's own taken on and, once
// the release is uninstalled, off (finalize), and the other helm-operators' replaced once the
// release is rudder's (replaceForeign).
type finalizers struct{ r *Reconciler }

// finalize uninstalls the CR's release (only a release it owns), then drops the finalizer; a
// CR that asks to be deleted after its dependents waits for them first (waitForDependents).
// What it does is plan.Next's to choose, for the release's state, as in every pass
// (machine.Uninstall).
func (f finalizers) finalize(ctx context.Context, obj *unstructured.Unstructured) (reconcile.Result, error) {
	r := f.r
	if !controllerutil.ContainsFinalizer(obj, Finalizer) {
		return reconcile.Result{}, nil
	}
	if res, wait, err := f.waitForDependents(ctx, obj); wait || err != nil {
		return res, err
	}
	log, key := logr.FromContextOrDiscard(ctx), client.ObjectKeyFromObject(obj)
	name, err := r.opts.Watch.ReleaseNameOf(obj)
	if err != nil {
		// Without a name there can be no release of ours (it could never install).
		log.Info("release name does not render; nothing to uninstall", "error", err.Error())
	} else {
		if !r.gate.StartAction(key) {
			log.V(1).Info("waiting for a turn to uninstall", "release", name)
			return reconcile.Result{RequeueAfter: machine.Jitter(gate.TurnRequeue)}, nil
		}
		defer r.gate.EndAction(obj.GetNamespace())
		if err := machine.Uninstall(ctx, r.world, obj, name); err != nil {
			return reconcile.Result{}, err
		}
	}
	controllerutil.RemoveFinalizer(obj, Finalizer)
	if err := f.patch(ctx, obj); err != nil {
		return r.conflicted(key, obj, err)
	}
	r.forget(key)
	return reconcile.Result{}, nil
}
