package controllers

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"helm.sh/helm/v3/pkg/release"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	rstatus "github.com/rudder-operator/rudder/api/status"
	"github.com/rudder-operator/rudder/internal/helm"
)

// foreignPendingGrace is how long a pending revision that rudder did not start is left to the
// operation that may still be running it (a person's helm rollback or upgrade, whose --timeout
// defaults to this) before rudder unlocks it as dead. rudder's own pending revisions are
// unlocked at once: rudder runs one operation per release, so one it finds was started by a
// process that is gone.
const foreignPendingGrace = 5 * time.Minute

// act takes the action the observed release state calls for.
func (p *pass) act(ctx context.Context) *outcome {
	o := &outcome{}
	if p.held != nil {
		p.hold(o)
		return o
	}
	if _, due := p.rollbackDue(); due && !p.takeTurn(o) {
		return o
	}
	if p.requestedRollback(o); o.err != nil {
		return o
	}
	if p.rolledBack {
		// The release changed under the observation: look again.
		var err error
		if p.release, err = p.observeRelease(ctx, true); err != nil {
			o.fail(rstatus.ReasonReconcileError, err)
			return o
		}
	}
	p.apply(ctx, p.release, o)
	return o
}

// hold reports a release a pre-release hook holds as it is: no action, the objects of the
// newest revision (when this CR made one) still looked at.
func (p *pass) hold(o *outcome) {
	reason := rstatus.ReasonHeld
	if p.held.Reason != "" {
		reason = p.held.Reason // the hook's own word for it ("Scheduled", "Done")
	}
	o.phase, o.reason, o.message = phaseHeld, reason, p.held.Message
	prev := metav1.ConditionFalse
	if c := p.cond(rstatus.TypeReleased); c != nil {
		prev = c.Status
	}
	o.released = &condition{prev, reason, p.held.Message}
	o.requeueIn(p.held.RequeueAfter)
	if h := p.release.head; h != nil && h.OwnerUID == p.want.OwnerUID {
		o.head, o.rel = h, p.release.rel
	}
}

// apply brings the release from its observed state to the desired one: nothing to do, a
// conflict, a pending revision to wait for or unlock, the remains of a dead operation to
// clear, then one install or upgrade.
func (p *pass) apply(ctx context.Context, obs observed, o *outcome) {
	if obs.rel != nil && obs.state != helm.StateConflict && !p.adopt(ctx, obs.rel, o) {
		return
	}
	switch obs.state {
	case helm.StateInSync:
		if p.supersede(obs.head, o) {
			p.inSync(obs.head, o)
		}
		return
	case helm.StateRolledBack:
		if p.supersede(obs.head, o) {
			p.keepRollback(obs, o)
		}
		return
	case helm.StateConflict:
		p.conflict(obs.rel, o)
		return
	}
	if !p.takeTurn(o) {
		return
	}
	switch obs.state {
	case helm.StateLocked:
		if p.foreignOperation(obs.rel, o) || !p.unlock(obs.rel, o) {
			return
		}
		obs.state = helm.StateFailed
	}
	next, deployed, ok := p.clear(obs, o)
	if !ok {
		return
	}
	if p.heldBack(o) {
		if deployed != nil && p.r.opts.Watch.RollsBack() {
			// The pass whose upgrade failed could not roll back (its history read or its
			// rollback failed, and was retried): this one does.
			p.rollBackFailedUpgrade(deployed.Version, fmt.Sprintf("upgrading release %s: %s", p.relName, p.st.Release.Failed.Message), false, o)
		}
		return
	}
	if next != helm.StateAbsent {
		if obs.head != nil {
			p.upgradeFrom = obs.head.Revision
		}
		p.upgrade(ctx, o)
		return
	}
	if !p.install(ctx, o) {
		return
	}
	if !obs.assumed {
		// Created since storage was read: decide again in a pass of its own.
		o.fail(rstatus.ReasonReconcileError, fmt.Errorf("installing %s: %w", p.relName, helm.ErrNameInUse))
		return
	}
	// The name is taken after all (the cache is behind, or the release is not rudder's):
	// decide from storage.
	p.log.V(1).Info("release name in use although the cache has no revision; reading storage", "release", p.relName)
	again, err := p.observeRelease(ctx, true)
	if err != nil {
		o.fail(rstatus.ReasonReconcileError, err)
		return
	}
	p.apply(ctx, again, o)
}

// clear removes what a dead operation left, so that one install or upgrade follows: it
// returns StateAbsent (install) or StateOutOfSync (upgrade), and, when the newest revision
// failed, the deployed revision before it (nil when none).
func (p *pass) clear(obs observed, o *outcome) (helm.State, *release.Release, bool) {
	switch obs.state {
	case helm.StateUninstalled:
		// An uninstall that died (rudder's clean-up of a failed install, killed) or one that
		// kept its history: Helm installs over neither, so finish it first.
		if err := p.r.opts.Helm.Uninstall(p.scope, p.relName, "rudder: finishing an uninstall before installing again"); err != nil {
			o.fail(rstatus.ReasonReconcileError, fmt.Errorf("finishing the uninstall of %s: %w", p.relName, err))
			return "", nil, false
		}
		return helm.StateAbsent, nil, true
	case helm.StateFailed:
		deployed, err := p.r.opts.Helm.LastDeployed(p.scope, p.relName, obs.rel.Version)
		if err != nil {
			o.fail(rstatus.ReasonReconcileError, err)
			return "", nil, false
		}
		if deployed != nil {
			return helm.StateOutOfSync, deployed, true
		}
		// Never deployed: a failed install.
		if err := p.removeFailedInstall(); err != nil {
			o.fail(rstatus.ReasonReconcileError, err)
			return "", nil, false
		}
		return helm.StateAbsent, nil, true
	}
	return obs.state, nil, true
}

// removeFailedInstall uninstalls a release whose install failed, with the objects it made.
func (p *pass) removeFailedInstall() error {
	if err := p.r.opts.Helm.Uninstall(p.scope, p.relName, "rudder: removing failed install"); err != nil {
		return fmt.Errorf("removing failed install of %s: %w", p.relName, err)
	}
	return nil
}

// heldBack stalls the pass when the desired (chart, values) already failed: it is not tried
// again until one of them changes. The failure is in status.release.failed, or in memory when
// the pass that failed wrote its status after this pass read the CR from the cache (events
// from the failed attempt's own objects wake passes that fast).
func (p *pass) heldBack(o *outcome) bool {
	var reason string
	f := p.st.Release
	switch m, ok := p.r.failures.of(p.key, p.obj.GetUID()); {
	case f != nil && f.Failed != nil && f.Failed.ChartDigest == p.want.ChartDigest && f.Failed.ValuesDigest == p.want.ValuesDigest:
		reason = p.failureReason(o)
	case ok && m.failed.ChartDigest == p.want.ChartDigest && m.failed.ValuesDigest == p.want.ValuesDigest:
		p.releaseStatus().Failed = &m.failed
		reason = m.reason
	default:
		return false
	}
	o.stall(reason, fmt.Sprintf("chart %s with values %s failed and is not retried until the spec or the chart changes: %s",
		helm.DisplayDigest(p.want.ChartDigest), helm.DisplayDigest(p.want.ValuesDigest), p.st.Release.Failed.Message))
	return true
}

// failureReason is the reason Released gives for the held-back failure: as this pass set it,
// else as the CR had it.
func (p *pass) failureReason(o *outcome) string {
	c := o.released
	if c == nil {
		if prev := p.cond(rstatus.TypeReleased); prev != nil {
			c = &condition{prev.Status, prev.Reason, prev.Message}
		}
	}
	if c != nil && c.status == metav1.ConditionFalse {
		switch c.reason {
		case rstatus.ReasonInstallFailed, rstatus.ReasonChartInvalid, rstatus.ReasonRolledBack, rstatus.ReasonRollbackFailed,
			rstatus.ReasonForbidden, rstatus.ReasonUnlocked, rstatus.ReasonValuesInvalid:
			return c.reason
		}
	}
	return rstatus.ReasonUpgradeFailed
}

// recordFailure holds the desired (chart, values) back after it failed: in
// status.release.failed, and in memory until the cache shows that status.
func (p *pass) recordFailure(reason string, err error) {
	st := p.releaseStatus()
	st.Failed = &rstatus.FailedRelease{ChartDigest: p.want.ChartDigest, ValuesDigest: p.want.ValuesDigest, Message: truncate(err.Error(), 1000)}
	p.r.failures.remember(p.key, p.obj.GetUID(), failure{reason: reason, failed: *st.Failed})
}

// foreignOperation reports (and says on the CR) whether the pending newest revision belongs to
// an operation rudder did not start that may still be running.
func (p *pass) foreignOperation(rel *release.Release, o *outcome) bool {
	if h := helm.HeadOf(rel); rel.Info == nil || h.MadeByRudder() || h.RudderRollback() {
		// rudder's own: an install or upgrade carries LabelRevision, a rollback
		// LabelRollbackRevision, each with its own number.
		return false
	}
	age := p.r.opts.Clock.Since(rel.Info.LastDeployed.Time)
	if age >= foreignPendingGrace {
		return false
	}
	msg := fmt.Sprintf("revision %d is %s by an operation rudder did not start (%q); waiting up to %s from its start before unlocking it",
		rel.Version, rel.Info.Status, rel.Info.Description, foreignPendingGrace)
	o.phase, o.reason, o.message = phaseLocked, rstatus.ReasonPendingOperation, msg
	o.released = &condition{metav1.ConditionFalse, rstatus.ReasonPendingOperation, msg}
	o.requeueIn(jitter(min(foreignPendingGrace-age, 30*time.Second)))
	return true
}

// unlock marks a pending revision that a dead operation left as failed.
func (p *pass) unlock(rel *release.Release, o *outcome) bool {
	prev := rel.Info.Status
	if err := p.r.opts.Helm.Unlock(p.scope, rel); err != nil {
		o.fail(rstatus.ReasonReconcileError, fmt.Errorf("unlocking release %s: %w", p.relName, err))
		return false
	}
	releaseActions.WithLabelValues(p.r.gvkLabel(), "unlock", "ok").Inc()
	msg := fmt.Sprintf("revision %d was left %s by an operation that is gone; marked failed", rel.Version, prev)
	o.note(corev1.EventTypeWarning, rstatus.ReasonUnlocked, "Unlock", msg)
	o.released = &condition{metav1.ConditionFalse, rstatus.ReasonUnlocked, msg}
	return true
}

// supersede completes a history the cache shows with older revisions still marked deployed
// next to the deployed newest one (Helm only logs a failed update of the revision an upgrade
// or rollback replaces): it marks them superseded. It returns false when the pass ends here.
func (p *pass) supersede(h *helm.Head, o *outcome) bool {
	if len(h.OlderDeployed) == 0 {
		return true
	}
	marked, err := p.r.opts.Helm.Supersede(p.scope, p.relName)
	if err != nil {
		o.fail(rstatus.ReasonReconcileError, fmt.Errorf("marking the older deployed revisions of %s superseded: %w", p.relName, err))
		return false
	}
	if len(marked) > 0 {
		releaseActions.WithLabelValues(p.r.gvkLabel(), "supersede", "ok").Inc()
		o.note(corev1.EventTypeNormal, rstatus.ReasonSuperseded, "Supersede", fmt.Sprintf(
			"revisions %v were still marked deployed next to revision %d (an update of their records was lost while they were replaced); marked superseded",
			marked, h.Revision))
	}
	return true
}

// inSync: the release is deployed from exactly what the spec and chart give now.
func (p *pass) inSync(h *helm.Head, o *outcome) {
	o.phase, o.reason, o.head = phaseInSync, rstatus.ReasonUpToDate, h
	if c := p.cond(rstatus.TypeStalled); c != nil && c.Status == metav1.ConditionFalse &&
		(c.Reason == rstatus.ReasonInstallSucceeded || c.Reason == rstatus.ReasonUpgradeSucceeded) {
		o.reason = c.Reason // the action that made this revision: no write to say it again
	}
	p.log.V(1).Info("release in sync", "release", p.relName, "revision", h.Revision)
	st := p.st.Release
	if st == nil || st.Name != p.relName || st.Revision != h.Revision {
		chartName := ""
		if st != nil && st.Revision == h.Revision {
			chartName = st.Chart
		}
		st = &rstatus.Release{Name: p.relName, Revision: h.Revision, Chart: chartName,
			ChartDigest: h.ChartDigest, ValuesDigest: h.ValuesDigest, RollbackRequest: p.rollbackRequest()}
		p.st.Release = st
	}
	// What rudder would make is this revision.
	st.RolledBackTo = h.RolledBackTo()
	if a := st.Applied; a == nil || a.Generation != p.gen || a.ChartDigest != p.want.ChartDigest {
		st.Applied = &rstatus.AppliedRelease{Revision: h.Revision, Generation: p.gen, ChartDigest: p.want.ChartDigest}
	}
	if st.Chart == "" {
		st.Chart = helm.ChartRef(p.snap.Chart)
	}
	st.Failed = nil
	p.r.failures.forget(p.key)
	// Keep the message of the install or upgrade that made the revision.
	if c := p.cond(rstatus.TypeReleased); c == nil || c.Status != metav1.ConditionTrue || c.Reason == rstatus.ReasonManualRollback {
		o.released = &condition{metav1.ConditionTrue, rstatus.ReasonUpToDate,
			fmt.Sprintf("revision %d is deployed from the current spec and chart", h.Revision)}
	}
}

// conflict stalls the CR on a release of its name that another owner made.
func (p *pass) conflict(rel *release.Release, o *outcome) {
	owner := rel.Labels[helm.LabelOwnerKind]
	if owner == "" {
		owner = "something other than rudder"
	} else {
		owner = fmt.Sprintf("another %s (uid %s)", owner, rel.Labels[helm.LabelOwnerUID])
	}
	o.stall(rstatus.ReasonReleaseNameConflict, fmt.Sprintf(
		"release %q in namespace %s belongs to %s; rudder never takes over a release it did not make for this CR: rename one of them (watches.yaml releaseName) or remove that release",
		p.relName, p.key.Namespace, owner))
}

// forbidden records an action the API server refused to the identity the release acts as
// (rudder's ClusterRole, or the tenant's ServiceAccount, lacks a rule for something the chart
// renders or reads). Unlike a chart error it is retried with back-off, so granting the rule
// recovers without touching the CR.
func (p *pass) forbidden(action string, err error, o *outcome) {
	hint := "grant the missing rule in rudder's ClusterRole (config/rbac/role.yaml)"
	if p.scope.ServiceAccount != "" {
		hint = fmt.Sprintf("the release acts as ServiceAccount %s/%s: grant the missing rule to it (a Role in its namespace)",
			p.scope.Namespace, p.scope.ServiceAccount)
	}
	msg := err.Error() + "; " + hint + "; the release is retried with back-off"
	o.note(corev1.EventTypeWarning, rstatus.ReasonForbidden, action, msg)
	o.released = &condition{metav1.ConditionFalse, rstatus.ReasonForbidden, msg}
	o.phase = phaseFailed
	o.fail(rstatus.ReasonForbidden, errors.New(msg))
}

// request builds the Helm request of an install or upgrade, after the checks that need no
// cluster (once per pass); it returns nil when the outcome says why not.
func (p *pass) request(action string, o *outcome) *helm.Request {
	if !p.preflighted {
		p.preflighted = true
		if err := helm.ValidateValues(p.snap.Chart, p.values); err != nil {
			o.stall(rstatus.ReasonValuesInvalid, "values do not match the chart's values.schema.json: "+err.Error())
			return nil
		}
		if len(p.overridden) > 0 {
			o.note(corev1.EventTypeNormal, "OverrideApplied", "Render",
				"watches.yaml overrideValues set "+strings.Join(p.overridden, ", ")+" on top of the spec")
		}
	}
	ch, err := p.snap.Fresh()
	if err != nil {
		o.fail(rstatus.ReasonReconcileError, err)
		return nil
	}
	req := p.r.opts.Watch.Request(p.obj, p.scope, p.relName, ch, p.snap.Digest, p.values, p.want.ValuesDigest,
		helm.Description(action, p.gen, ch, p.snap.Digest, p.want.ValuesDigest, p.overridden))
	req.Carried = p.carried()
	return req
}
