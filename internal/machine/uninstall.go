package machine

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"

	rstatus "github.com/rudder-operator/rudder/api/status"
	"github.com/rudder-operator/rudder/internal/plan"
)

// uninstall removes a deleted CR's release with its objects (plan.Uninstall): the one action
// of a deletion, chosen by plan.Next like every other and run through do.
type uninstall struct{}

func (uninstall) name() plan.Action { return plan.Uninstall }

func (uninstall) run(ctx context.Context, e *env, _ observed) result {
	if err := e.helm.Actions.Uninstall(ctx, e.scope, e.release, "uninstalled by rudder: "+e.kind+" deleted"); err != nil {
		msg := fmt.Sprintf("uninstalling release %s: %v", e.release, err)
		return result{verdict: retry, reason: rstatus.ReasonUninstallFailed, err: fmt.Errorf("uninstalling release %s: %w", e.release, err),
			call: callFailed, notes: []note{{corev1.EventTypeWarning, rstatus.ReasonUninstallFailed, "Uninstall", msg}}}
	}
	return result{verdict: succeeded, call: callOK, after: &observed{},
		notes: []note{{corev1.EventTypeNormal, "Uninstalled", "Uninstall", fmt.Sprintf("release %s uninstalled", e.release)}}}
}

// letGo hands a deleted CR's release over instead of uninstalling it (plan.LetGo): its objects
// and records stay, without rudder's marks or the CR's owner reference (helm.Owners.LetGo).
type letGo struct{}

func (letGo) name() plan.Action { return plan.LetGo }

func (letGo) run(ctx context.Context, e *env, _ observed) result {
	n, err := e.helm.Owners.LetGo(ctx, e.scope, e.release)
	if err != nil {
		return result{verdict: retry, reason: rstatus.ReasonReconcileError, err: fmt.Errorf("letting release %s go: %w", e.release, err),
			call: callFailed}
	}
	return result{verdict: succeeded, call: callOK, after: &observed{},
		notes: []note{{corev1.EventTypeNormal, "LetGo", "LetGo", fmt.Sprintf(
			"release %s and its objects kept (%s: keep): %d objects and every revision's record no longer carry rudder's marks or an owner "+
				"reference to this %s",
			e.release, AnnotationOnDelete, n, e.kind)}}}
}
