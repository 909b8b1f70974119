package controllers

import (
	"context"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// The doors of the state machine (machine.World) that the Reconciler keeps: each a view of it
// that lets a pass do one thing (the rollouts door is in rollout.go).

// dependentWatches starts the dependent watch of an operand kind (machine.Watches).
type dependentWatches struct{ r *Reconciler }

func (d dependentWatches) EnsureWatch(ctx context.Context, gvk schema.GroupVersionKind) error {
	return d.r.ensureWatch(ctx, gvk)
}

// statusWriter sends a pass's status patch (machine.StatusWriter), and keeps what it wrote
// for the passes that read a cache behind it (statuses.go).
type statusWriter struct{ r *Reconciler }

func (d statusWriter) PatchStatus(ctx context.Context, obj *unstructured.Unstructured, patch []byte) error {
	key := client.ObjectKeyFromObject(obj)
	// The pass is over: of the CR the API server sends back, only its metadata is read.
	res := d.r.metadataOf(key)
	if err := d.r.opts.Client.Status().Patch(ctx, res, client.RawPatch(types.MergePatchType, patch)); err != nil {
		return err
	}
	d.r.statuses.wrote(key, obj.GetUID(), res.GetResourceVersion(), obj.Object["status"], obj.GetFinalizers())
	return nil
}
