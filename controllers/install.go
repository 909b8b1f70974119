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
)

// install installs the release. It reports whether Helm refused because the name is taken, in
// which case nothing was written (not a failed install, nothing to clean up) and the outcome
// is untouched.
func (p *pass) install(ctx context.Context, o *outcome) (nameInUse bool) {
	req := p.request("install", o)
	if req == nil {
		return false
	}
	rel, err := p.r.opts.Helm.Install(ctx, req)
	switch {
	case errors.Is(err, helm.ErrNameInUse):
		return true
	case err != nil:
		releaseActions.WithLabelValues(p.r.gvkLabel(), "install", "failed").Inc()
		p.installFailed(err, o)
		return false
	}
	releaseActions.WithLabelValues(p.r.gvkLabel(), "install", "ok").Inc()
	msg := fmt.Sprintf("installed revision %d of %s", rel.Version, req.Description)
	o.note(corev1.EventTypeNormal, rstatus.ReasonInstallSucceeded, "Install", msg)
	p.succeeded(req, rel, rstatus.ReasonInstallSucceeded, msg, o)
	return false
}

// installFailed retries what is transient, and otherwise removes the failed install (only a
// release this CR made: one another owner created under the same name since this pass looked
// is a conflict) and holds the (chart, values) back.
func (p *pass) installFailed(err error, o *outcome) {
	if isTransient(err) {
		o.fail(rstatus.ReasonInstallFailed, fmt.Errorf("installing %s: %w", p.relName, err))
		return
	}
	reason := rstatus.ReasonInstallFailed
	if isChartError(err) {
		reason = rstatus.ReasonChartInvalid
	}
	last, lerr := p.r.opts.Helm.Last(p.scope, p.relName)
	switch {
	case lerr != nil && helm.IsForbidden(err):
		// Refused as a whole (e.g. the tenant may not read its release storage either).
		err = fmt.Errorf("%w (and reading the release to clean up: %w)", err, lerr)
	case lerr != nil:
		o.fail(rstatus.ReasonInstallFailed, fmt.Errorf("installing %s: %w (and reading the release to clean up: %w)", p.relName, err, lerr))
		return
	case last != nil && last.Labels[helm.LabelOwnerUID] != p.want.OwnerUID:
		p.conflict(last, o)
		return
	case last != nil:
		if uerr := p.removeFailedInstall(); uerr != nil {
			err = fmt.Errorf("%w (and %w)", err, uerr)
		}
	}
	if helm.IsForbidden(err) {
		p.forbidden("Install", fmt.Errorf("installing release %s: %w", p.relName, err), o)
		return
	}
	p.recordFailure(reason, err)
	msg := fmt.Sprintf("installing release %s: %v", p.relName, err)
	o.note(corev1.EventTypeWarning, reason, "Install", msg)
	o.stall(reason, msg)
}

// succeeded records a revision rudder made from the spec.
func (p *pass) succeeded(req *helm.Request, rel *release.Release, reason, msg string, o *outcome) {
	p.r.failures.forget(p.key)
	p.st.Release = &rstatus.Release{
		Name: p.relName, Revision: rel.Version, Chart: helm.ChartRef(rel.Chart),
		ChartDigest: p.want.ChartDigest, ValuesDigest: p.want.ValuesDigest,
		Applied:         &rstatus.AppliedRelease{Revision: rel.Version, Generation: p.gen, ChartDigest: p.want.ChartDigest},
		RollbackRequest: p.rollbackRequest(),
	}
	o.phase, o.reason, o.applied, o.made = phaseInSync, reason, true, req.Objects
	o.head, o.rel = helm.HeadOf(rel), rel
	o.released = &condition{metav1.ConditionTrue, reason, msg}
}
