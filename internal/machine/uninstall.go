package machine

import (
	"context"
	"fmt"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	rstatus "github.com/rudder-operator/rudder/api/status"
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

// Uninstall takes the actions plan.Next chooses for release name of obj, a deleted CR, until
// the release is gone or is not the CR's to remove, and records their Events; obj's status is
// not written. An error is retried with back-off.
func Uninstall(ctx context.Context, w *World, obj *unstructured.Unstructured, name string) error {
	p := newPass(w, obj, nil)
	p.log = logr.FromContextOrDiscard(ctx)
	p.relName, p.want.OwnerUID = name, string(obj.GetUID())
	return p.uninstall(ctx)
}

// uninstall takes the actions plan.Next chooses for a deleted CR's release until it is gone,
// recording their Events; an error is retried with back-off.
func (p *pass) uninstall(ctx context.Context) error {
	rel, err := p.w.Helm.Last(ctx, p.scope, p.relName)
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
