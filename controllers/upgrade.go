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

func (p *pass) upgrade(ctx context.Context, o *outcome) {
	req := p.request("upgrade", o)
	if req == nil {
		return
	}
	if p.upgradeFrom > 0 {
		req.Revision = p.upgradeFrom + 1
	}
	rel, err := p.r.opts.Helm.Upgrade(ctx, req)
	if err == nil {
		releaseActions.WithLabelValues(p.r.gvkLabel(), "upgrade", "ok").Inc()
		msg := fmt.Sprintf("upgraded to revision %d: %s", rel.Version, req.Description)
		o.note(corev1.EventTypeNormal, rstatus.ReasonUpgradeSucceeded, "Upgrade", msg)
		p.succeeded(req, rel, rstatus.ReasonUpgradeSucceeded, msg, o)
		return
	}
	releaseActions.WithLabelValues(p.r.gvkLabel(), "upgrade", "failed").Inc()
	switch {
	case isTransient(err):
		o.fail(rstatus.ReasonUpgradeFailed, fmt.Errorf("upgrading %s: %w", p.relName, err))
	case isChartError(err):
		// Refused before anything was applied: the release is untouched.
		p.recordFailure(rstatus.ReasonChartInvalid, err)
		msg := fmt.Sprintf("upgrading release %s: %v", p.relName, err)
		o.note(corev1.EventTypeWarning, rstatus.ReasonChartInvalid, "Upgrade", msg)
		o.stall(rstatus.ReasonChartInvalid, msg)
	default:
		p.upgradeFailed(err, o)
	}
}

// upgradeFailed holds the (chart, values) back and, when the failed upgrade left a revision,
// rolls back to the last deployed one (unless the watch turns that off).
func (p *pass) upgradeFailed(err error, o *outcome) {
	forbidden := helm.IsForbidden(err)
	msg := fmt.Sprintf("upgrading release %s: %v", p.relName, err)
	if !forbidden {
		p.recordFailure(rstatus.ReasonUpgradeFailed, err)
		o.note(corev1.EventTypeWarning, rstatus.ReasonUpgradeFailed, "Upgrade", msg)
	}
	// stop ends the pass: Forbidden is retried, anything else waits for a change.
	stop := func(msg, stalledSuffix string) {
		if forbidden {
			p.forbidden("Upgrade", errors.New(msg), o)
			return
		}
		o.stall(rstatus.ReasonUpgradeFailed, msg+stalledSuffix)
	}
	last, lerr := p.r.opts.Helm.Last(p.scope, p.relName)
	if lerr != nil {
		// Retried: the failure is recorded, so the next pass holds the pair back and rolls
		// back (see apply).
		o.fail(rstatus.ReasonUpgradeFailed, fmt.Errorf("%s; reading the release's history to roll back: %w", msg, lerr))
		return
	}
	if last != nil && last.Info != nil && last.Info.Status == release.StatusDeployed {
		// Helm refused before it recorded a revision (e.g. reading an object it would create
		// was forbidden): nothing changed, so there is nothing to roll back — and a retry must
		// not add a rollback revision each time.
		stop(fmt.Sprintf("%s; nothing was changed, the release stays at revision %d", msg, last.Version),
			"; not retried until the spec or the chart changes")
		return
	}
	if !p.r.opts.Watch.RollsBack() {
		stop(msg+" (automatic rollback is off for this watch)", "")
		return
	}
	var deployed *release.Release
	if last != nil {
		if deployed, lerr = p.r.opts.Helm.LastDeployed(p.scope, p.relName, last.Version); lerr != nil {
			o.fail(rstatus.ReasonUpgradeFailed, fmt.Errorf("%s; reading the release's history to roll back: %w", msg, lerr))
			return
		}
	}
	if deployed == nil {
		o.stall(rstatus.ReasonUpgradeFailed, msg+"; no deployed revision to roll back to")
		return
	}
	p.rollBackFailedUpgrade(deployed.Version, msg, forbidden, o)
}

// rollBackFailedUpgrade returns the release to revision to after a failed upgrade.
func (p *pass) rollBackFailedUpgrade(to int, msg string, forbidden bool, o *outcome) {
	desc := fmt.Sprintf("rudder rollback to revision %d: the upgrade to generation %d failed", to, p.gen)
	if err := p.r.opts.Helm.Rollback(p.scope, p.relName, to, p.r.opts.Watch.HistoryLimit(), desc); err != nil {
		releaseActions.WithLabelValues(p.r.gvkLabel(), "rollback", "failed").Inc()
		o.note(corev1.EventTypeWarning, rstatus.ReasonRollbackFailed, "Rollback",
			fmt.Sprintf("rolling back %s to revision %d: %v", p.relName, to, err))
		o.released = &condition{metav1.ConditionFalse, rstatus.ReasonRollbackFailed,
			fmt.Sprintf("%s; rollback to revision %d failed: %v", msg, to, err)}
		o.fail(rstatus.ReasonRollbackFailed, err)
		return
	}
	releaseActions.WithLabelValues(p.r.gvkLabel(), "rollback", "ok").Inc()
	now, err := p.r.opts.Helm.Last(p.scope, p.relName)
	if err != nil || now == nil {
		o.fail(rstatus.ReasonReconcileError, fmt.Errorf("reading release after rollback: %w", err))
		return
	}
	st := p.releaseStatus()
	st.Revision = now.Version
	if forbidden {
		p.forbidden("Upgrade", fmt.Errorf("%s; rolled back to revision %d (now revision %d)", msg, to, now.Version), o)
		return
	}
	rb := fmt.Sprintf("%s; rolled back to revision %d (now revision %d); not retried until the spec or the chart changes", msg, to, now.Version)
	o.note(corev1.EventTypeNormal, rstatus.ReasonRolledBack, "Rollback", rb)
	st.RolledBackTo = to
	st.Chart = helm.ChartRef(now.Chart)
	st.ChartDigest = now.Labels[helm.LabelChartDigest]
	st.ValuesDigest = now.Labels[helm.LabelValuesDigest]
	o.stall(rstatus.ReasonUpgradeFailed, rb)
	o.released = &condition{metav1.ConditionFalse, rstatus.ReasonRolledBack, rb}
}
