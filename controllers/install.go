package controllers

import (
	"context"
	"errors"
	"fmt"

	"helm.sh/helm/v3/pkg/release"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	rstatus "github.com/rudder-operator/rudder/api/status"
	"github.com/rudder-operator/rudder/internal/helm"
	"github.com/rudder-operator/rudder/internal/plan"
	"github.com/rudder-operator/rudder/internal/records"
)

// install installs the release (records.StateAbsent).
type install struct{}

func (install) name() plan.Action { return plan.Install }

func (install) run(ctx context.Context, p *pass, obs observed) result {
	req, pre, stop := p.request(ctx, plan.Install)
	if stop != nil {
		return *stop
	}
	rel, err := p.r.opts.Helm.Install(ctx, req)
	switch {
	case errors.Is(err, helm.ErrNameInUse) && !obs.assumed:
		// Created since storage was read: decide again in a pass of its own.
		return result{verdict: retry, reason: rstatus.ReasonReconcileError, notes: pre, err: fmt.Errorf("installing %s: %w", p.relName, helm.ErrNameInUse)}
	case errors.Is(err, helm.ErrNameInUse):
		// Nothing was written. The name is taken after all (the cache is behind, or the
		// release is not rudder's): the pass decides again from storage.
		p.log.V(1).Info("release name in use although the cache has no revision; reading storage", "release", p.relName)
		return result{verdict: succeeded, notes: pre}
	case err != nil:
		res := p.releaseFailed("Install", "installing", rstatus.ReasonInstallFailed, err)
		res.notes, res.call = append(append(pre, requestNotes(req)...), res.notes...), callFailed
		return res
	}
	res := p.madeRevision(req, rel, rstatus.ReasonInstallSucceeded, "Install", fmt.Sprintf("installed revision %d of %s", rel.Version, req.Description))
	res.notes, res.call = append(append(pre, requestNotes(req)...), res.notes...), callOK
	return res
}

// madeRevision is the result of an install or upgrade that made revision rel.
func (p *pass) madeRevision(req *helm.Request, rel *release.Release, reason, event, msg string) result {
	return result{verdict: succeeded, phase: phaseInSync, reason: reason,
		notes:    []note{{corev1.EventTypeNormal, reason, event, msg}},
		released: &condition{metav1.ConditionTrue, reason, msg},
		made:     rel, objects: req.Objects, head: records.HeadOf(rel), rel: rel,
		record: p.madeRecord(rel)}
}

// releaseFailed is the result of an install or upgrade that failed with err: retried when it
// is transient; otherwise failed, and held back unless the API server refused the release's
// identity. What follows (removing a failed install, a rollback) is plan.Next's to decide.
func (p *pass) releaseFailed(event, verb, reason string, err error) result {
	if isTransient(err) {
		return result{verdict: retry, reason: reason, err: fmt.Errorf("%s %s: %w", verb, p.relName, err)}
	}
	msg := fmt.Sprintf("%s release %s: %v", verb, p.relName, err)
	if helm.ImmutableField(err) && !p.r.opts.Watch.Forces() {
		msg += "; the update changes an immutable field: upgrade.force on the watch replaces such objects (deletes and creates them)"
	}
	if helm.IsForbidden(err) {
		// Reported, with an Event, when the pass ends (see forbidden).
		return result{verdict: failed, forbidden: true, reason: rstatus.ReasonForbidden, message: msg}
	}
	switch {
	case helm.IsPostRenderError(err):
		// The watch's patches, not the chart: nothing was applied.
		reason = rstatus.ReasonPostRenderFailed
	case isChartError(err):
		// Refused before anything was applied.
		reason = rstatus.ReasonChartInvalid
	}
	// Released says so when the pass ends, with what became of the failure.
	return result{verdict: failed, reason: reason, message: msg,
		notes: []note{{corev1.EventTypeWarning, reason, event, msg}}, record: p.failedRecord(reason, err)}
}

// removeFailedInstall uninstalls a release whose install failed and that has no deployed
// revision, with the objects it made (records.StateFailed, never deployed).
type removeFailedInstall struct{}

func (removeFailedInstall) name() plan.Action { return plan.RemoveFailed }

func (removeFailedInstall) run(ctx context.Context, p *pass, _ observed) result {
	if err := p.r.opts.Helm.Uninstall(ctx, p.scope, p.relName, "rudder: removing failed install"); err != nil {
		return result{verdict: retry, reason: rstatus.ReasonReconcileError, err: fmt.Errorf("removing failed install of %s: %w", p.relName, err), call: callFailed}
	}
	return result{verdict: succeeded, after: &observed{state: records.StateAbsent}, call: callOK}
}

// finishUninstall completes an uninstall that died (rudder's clean-up of a failed install,
// killed) or one that kept its history: Helm installs over neither (records.StateUninstalled).
type finishUninstall struct{}

func (finishUninstall) name() plan.Action { return plan.FinishUninstall }

func (finishUninstall) run(ctx context.Context, p *pass, _ observed) result {
	if err := p.r.opts.Helm.Uninstall(ctx, p.scope, p.relName, "rudder: finishing an uninstall before installing again"); err != nil {
		return result{verdict: retry, reason: rstatus.ReasonReconcileError, err: fmt.Errorf("finishing the uninstall of %s: %w", p.relName, err), call: callFailed}
	}
	return result{verdict: succeeded, after: &observed{state: records.StateAbsent}, call: callOK}
}
