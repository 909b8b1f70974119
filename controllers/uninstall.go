package controllers

import (
	"context"
	"fmt"

	"github.com/go-logr/logr"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	rstatus "github.com/rudder-operator/rudder/api/status"
	"github.com/rudder-operator/rudder/internal/gate"
	"github.com/rudder-operator/rudder/internal/plan"
	"github.com/rudder-operator/rudder/internal/records"
)

// uninstall removes a deleted CR's release with its objects (plan.Uninstall): the one action
// of a deletion, chosen by plan.Next like every other and run through do.
type uninstall struct{}

func (uninstall) name() plan.Action { return plan.Uninstall }

func (uninstall) run(ctx context.Context, e *env, _ observed) result {
	if err := e.helm.Uninstall(ctx, e.scope, e.release, "uninstalled by rudder: "+e.kind+" deleted"); err != nil {
		msg := fmt.Sprintf("uninstalling release %s: %v", e.release, err)
		return result{verdict: retry, reason: rstatus.ReasonUninstallFailed, err: fmt.Errorf("uninstalling release %s: %w", e.release, err),
			call: callFailed, notes: []note{{corev1.EventTypeWarning, rstatus.ReasonUninstallFailed, "Uninstall", msg}}}
	}
	return result{verdict: succeeded, call: callOK, after: &observed{state: records.StateAbsent},
		notes: []note{{corev1.EventTypeNormal, "Uninstalled", "Uninstall", fmt.Sprintf("release %s uninstalled", e.release)}}}
}

// finalize uninstalls the CR's release (only a release it owns), then drops the finalizer.
// What it does is plan.Next's to choose, for the release's state, as in every pass.
func (r *Reconciler) finalize(ctx context.Context, obj *unstructured.Unstructured) (reconcile.Result, error) {
	if !controllerutil.ContainsFinalizer(obj, Finalizer) {
		return reconcile.Result{}, nil
	}
	p := newPass(r, obj, nil) // its status is not written
	p.log = logr.FromContextOrDiscard(ctx)
	name, err := r.releaseName(obj)
	if err != nil {
		// Without a name there can be no release of ours (it could never install).
		p.log.Info("release name does not render; nothing to uninstall", "error", err.Error())
	} else {
		p.relName, p.want.OwnerUID = name, string(obj.GetUID())
		if !r.gate.StartAction(p.key) {
			p.log.V(1).Info("waiting for a turn to uninstall", "release", name)
			return reconcile.Result{RequeueAfter: jitter(gate.TurnRequeue)}, nil
		}
		defer r.gate.EndAction(obj.GetNamespace())
		if err := p.uninstall(ctx); err != nil {
			return reconcile.Result{}, err
		}
	}
	controllerutil.RemoveFinalizer(obj, Finalizer)
	if err := r.patchFinalizers(ctx, obj); err != nil {
		return r.conflicted(p.key, obj, err)
	}
	r.forget(p.key)
	return reconcile.Result{}, nil
}

// uninstall takes the actions plan.Next chooses for a deleted CR's release until it is gone,
// recording their Events; an error is retried with back-off.
func (p *pass) uninstall(ctx context.Context) error {
	rel, err := p.r.opts.Helm.Last(ctx, p.scope, p.relName)
	if err != nil {
		return fmt.Errorf("reading release %s: %w", p.relName, err)
	}
	h := records.HeadOf(rel)
	obs := observed{head: h, rel: rel, state: records.DetermineState(h, p.want)}
	o := &outcome{}
	defer func() {
		for _, n := range o.events {
			p.event(n)
		}
	}()
	for range maxSteps {
		c, end := plan.Next(plan.Situation{Deleting: true, State: obs.state, Taken: o.taken})
		if c.None() {
			if end == plan.EndGone && obs.state == records.StateConflict {
				p.log.Info("release belongs to another owner; leaving it", "release", p.relName)
			}
			return nil
		}
		res := p.take(ctx, c, obs, o)
		if res.verdict != succeeded {
			return res.err
		}
		if obs, err = p.after(ctx, res); err != nil {
			return err
		}
	}
	return fmt.Errorf("release %s: more than %d actions to uninstall it", p.relName, maxSteps)
}
