package machine

import (
	"context"
	"errors"
	"fmt"

	rstatus "github.com/rudder-operator/rudder/api/status"
	"github.com/rudder-operator/rudder/internal/helm"
	"github.com/rudder-operator/rudder/internal/plan"
	"github.com/rudder-operator/rudder/internal/records"
)

// install installs the release (records.StateAbsent), with the request the actor prepared;
// over a failed install whose record is kept (records.Head.Kept), as the revision after it
// (Helm's replace), which leaves that record as it is in the history.
type install struct{ prepared }

func (install) name() plan.Action { return plan.Install }

func (a install) run(ctx context.Context, e *env, obs observed) result {
	if a.stop != nil {
		return *a.stop
	}
	req, pre := a.req, a.pre
	if h := obs.head; h != nil && h.Kept() {
		req.Replace, req.Revision = true, h.Revision+1
	}
	rel, err := e.helm.Actions.Install(ctx, req)
	switch {
	case errors.Is(err, helm.ErrNameInUse) && !obs.assumed:
		// Created since storage was read: decide again in a pass of its own.
		return result{verdict: retry, reason: rstatus.ReasonReconcileError, notes: pre, err: fmt.Errorf("installing %s: %w", e.release,
			helm.ErrNameInUse)}
	case errors.Is(err, helm.ErrNameInUse):
		// Nothing was written. The name is taken after all (the cache is behind, or the
		// release is not rudder's): the pass decides again from storage.
		e.log.V(1).Info("release name in use although the cache has no revision; reading storage", "release", e.release)
		return result{verdict: succeeded, notes: pre}
	case err != nil:
		res := e.releaseFailed("Install", "installing", rstatus.ReasonInstallFailed, err)
		res.notes, res.call = append(append(pre, requestNotes(req)...), res.notes...), callFailed
		return res
	}
	res := e.madeRevision(req, rel, rstatus.ReasonInstallSucceeded, "Install", fmt.Sprintf("installed revision %d of %s", rel.Version,
		req.Description))
	res.notes, res.call = append(append(pre, requestNotes(req)...), res.notes...), callOK
	return res
}

// removeFailedInstall removes the objects of a release whose install failed and that has no
// deployed revision (records.StateFailed, never deployed), and keeps the failed revision's
// record as the failure's (records.Head.Kept): `helm history` shows it, its labels carry the
// failure that holds the (chart, values) back, and the next install is made over it.
type removeFailedInstall struct{}

func (removeFailedInstall) name() plan.Action { return plan.RemoveFailed }

func (removeFailedInstall) run(ctx context.Context, e *env, _ observed) result {
	kept, err := e.helm.Actions.KeepFailed(ctx, e.scope, e.release, e.watch.Policies().HistoryLimit())
	if err != nil {
		return result{verdict: retry, reason: rstatus.ReasonReconcileError, err: fmt.Errorf("removing failed install of %s: %w", e.release,
			err), call: callFailed}
	}
	after := &observed{}
	if kept != nil {
		after = &observed{head: records.HeadOf(kept), rel: kept}
	}
	return result{verdict: succeeded, after: after, call: callOK}
}

// finishUninstall completes an uninstall that died (rudder's clean-up of a failed install,
// killed) or one that kept its history: Helm installs over neither (records.StateUninstalled).
type finishUninstall struct{}

func (finishUninstall) name() plan.Action { return plan.FinishUninstall }

func (finishUninstall) run(ctx context.Context, e *env, _ observed) result {
	if err := e.helm.Actions.Uninstall(ctx, e.scope, e.release, "rudder: finishing an uninstall before installing again"); err != nil {
		return result{verdict: retry, reason: rstatus.ReasonReconcileError, err: fmt.Errorf("finishing the uninstall of %s: %w", e.release,
			err), call: callFailed}
	}
	return result{verdict: succeeded, after: &observed{}, call: callOK}
}
