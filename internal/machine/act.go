package machine

import (
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	rstatus "github.com/rudder-operator/rudder/api/status"
	"github.com/rudder-operator/rudder/internal/helm"
	"github.com/rudder-operator/rudder/internal/plan"
	"github.com/rudder-operator/rudder/internal/records"
	"github.com/rudder-operator/rudder/internal/release"
)

// ForeignPendingGrace is how long a pending revision that rudder did not start is left to the
// operation that may still be running it (a person's helm rollback or upgrade, whose --timeout
// defaults to this) before rudder unlocks it as dead. rudder's own pending revisions are
// unlocked at once: rudder runs one operation per release, so one it finds was started by a
// process that is gone.
const ForeignPendingGrace = 5 * time.Minute

// hold ends a pass a pre-release hook holds: no action, the objects of the newest revision
// (when this CR made one) still looked at.
func (p *pass) hold(obs observed) result {
	reason := rstatus.ReasonHeld
	if p.held.Reason != "" {
		reason = p.held.Reason // the hook's own word for it ("Scheduled", "Done")
	}
	prev := metav1.ConditionFalse
	if c := p.cond(rstatus.TypeReleased); c != nil {
		prev = c.Status
	}
	res := result{verdict: succeeded, phase: phaseHeld, reason: reason, message: p.held.Message,
		released: &condition{prev, reason, p.held.Message}, requeue: p.held.RequeueAfter}
	if h := obs.head; h != nil && h.OwnerUID == p.want.OwnerUID {
		res.head, res.rel = h, obs.rel
	}
	return res
}

// holdBack ends a pass on a desired (chart, values) that failed: in this pass (the result
// says what became of it), or in an earlier one. It is not tried again until one of them
// changes; a failure the API server's refusal caused is retried with back-off.
func (p *pass) holdBack(obs observed, s plan.Situation, o *outcome) result {
	f := o.failure
	if f == nil {
		held, _ := p.heldBackFailure()
		reason := held.reason
		if reason == "" {
			reason = p.failureReason(o)
		}
		msg := fmt.Sprintf("chart %s with values %s failed and is not retried until the spec or the chart changes: %s",
			records.DisplayDigest(p.want.ChartDigest), records.DisplayDigest(p.want.ValuesDigest), held.failed.Message)
		// Written again: a no-op.
		res := result{verdict: failed, reason: reason, message: msg, record: record{failed: held}}
		// Released keeps what happened to the release last (RolledBack, InstallFailed, …) when
		// it says so already.
		if c := p.cond(rstatus.TypeReleased); o.released == nil && (c == nil || c.Status != metav1.ConditionFalse) {
			res.released = &condition{metav1.ConditionFalse, reason, msg}
		}
		return res
	}
	res, upgraded := f.result, f.action.name() == plan.Upgrade
	msg := res.message
	switch {
	case f.action.name() == plan.Rollback:
		// Its result says it all, and Released says it rolled back.
		if res.forbidden {
			return p.forbidden("Upgrade", msg)
		}
		return result{verdict: failed, reason: res.reason, message: msg}
	case upgraded && obs.head != nil && obs.head.Status == release.StatusDeployed:
		// Helm refused before it recorded a revision (reading an object it would create was
		// forbidden, say): nothing changed, so there is nothing to roll back.
		msg += fmt.Sprintf("; nothing was changed, the release stays at revision %d", obs.head.Revision)
		if !res.forbidden {
			msg += "; not retried until the spec or the chart changes"
		}
	case upgraded && !s.RollsBack:
		msg += " (automatic rollback is off for this watch)"
	case upgraded && s.Deployed == 0:
		msg += "; no deployed revision to roll back to"
	}
	if res.forbidden {
		return p.forbidden(eventAction(f.action), msg)
	}
	return result{verdict: failed, reason: res.reason, message: msg, released: &condition{metav1.ConditionFalse, res.reason, msg}}
}

// eventAction is the action Events name for a release action.
func eventAction(a action) string {
	if a.name() == plan.Install {
		return "Install"
	}
	return "Upgrade"
}

// failureReason is the reason Released gives for a held-back failure of an earlier pass whose
// record has none (an older rudder's): as this pass set it, else as the CR had it.
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
			rstatus.ReasonForbidden, rstatus.ReasonUnlocked, rstatus.ReasonValuesInvalid, rstatus.ReasonPostRenderFailed:
			return c.reason
		}
	}
	return rstatus.ReasonUpgradeFailed
}

// foreign reports whether the pending newest revision belongs to an operation rudder did not
// start that may still be running.
func (p *pass) foreign(rel *release.Release) bool {
	if h := records.HeadOf(rel); rel == nil || h.MadeByRudder() || h.RudderRollback() {
		// rudder's own: an install or upgrade carries LabelRevision, a rollback
		// LabelRollbackRevision, each with its own number.
		return false
	}
	return p.w.Clock.Since(rel.LastDeployed) < ForeignPendingGrace
}

// waitForOperation ends a pass on another operation's pending revision.
func (p *pass) waitForOperation(rel *release.Release) result {
	age := p.w.Clock.Since(rel.LastDeployed)
	msg := fmt.Sprintf("revision %d is %s by an operation rudder did not start (%q); waiting up to %s from its start before unlocking it",
		rel.Version, rel.Status, rel.Description, ForeignPendingGrace)
	return result{verdict: blocked, reason: rstatus.ReasonPendingOperation, message: msg,
		released: &condition{metav1.ConditionFalse, rstatus.ReasonPendingOperation, msg},
		requeue:  Jitter(min(ForeignPendingGrace-age, 30*time.Second))}
}

// inSync ends a pass on a revision deployed from exactly what the spec and chart give now.
func (p *pass) inSync(h *records.Head) result {
	res := result{verdict: succeeded, phase: phaseInSync, reason: rstatus.ReasonUpToDate, head: h}
	// The action that made this revision, as its record says; a record an older rudder made
	// does not, and its CR's condition does.
	switch h.MadeBy() {
	case records.ActionInstall:
		res.reason = rstatus.ReasonInstallSucceeded
	case records.ActionUpgrade:
		res.reason = rstatus.ReasonUpgradeSucceeded
	default:
		if c := p.cond(rstatus.TypeStalled); c != nil && c.Status == metav1.ConditionFalse &&
			(c.Reason == rstatus.ReasonInstallSucceeded || c.Reason == rstatus.ReasonUpgradeSucceeded) {
			res.reason = c.Reason
		}
	}
	p.log.V(1).Info("release in sync", "release", p.relName, "revision", h.Revision)
	rec := &revisionRecord{number: h.Revision, chartDigest: h.ChartDigest, valuesDigest: h.ValuesDigest, rolledBackTo: h.RolledBackTo()}
	st := p.st.Release
	if st != nil && st.Name == p.relName && st.Revision == h.Revision {
		rec.chart, rec.chartDigest, rec.valuesDigest = st.Chart, st.ChartDigest, st.ValuesDigest
	}
	if rec.chart == "" {
		rec.chart = helm.ChartRef(p.snap.Chart)
	}
	// What rudder would make is this revision.
	if a := p.facts().Applied; a == nil || a.Generation != p.gen || a.ChartDigest != p.want.ChartDigest || stApplied(st) == nil {
		rec.applied = &rstatus.AppliedRelease{Revision: h.Revision, Generation: p.gen, ChartDigest: p.want.ChartDigest}
	}
	res.record = record{revision: rec, clearFailed: true}
	// Keep the message of the install or upgrade that made the revision, unless it is about an
	// older generation (a pass that read the CR from a cache behind the upgrade's status).
	if c := p.cond(rstatus.TypeReleased); c == nil || c.Status != metav1.ConditionTrue || c.Reason == rstatus.ReasonManualRollback ||
		c.ObservedGeneration < p.gen {
		reason := rstatus.ReasonUpToDate
		if h.MadeBy() != "" {
			reason = res.reason
		}
		res.released = &condition{metav1.ConditionTrue, reason,
			fmt.Sprintf("revision %d is deployed from the current spec and chart", h.Revision)}
	}
	return res
}

func stApplied(st *rstatus.Release) *rstatus.AppliedRelease {
	if st == nil {
		return nil
	}
	return st.Applied
}

// conflict ends a pass on a release of the CR's name that another owner made.
func (p *pass) conflict(rel *release.Release) result {
	owner := rel.Labels[records.LabelOwnerKind]
	if owner == "" {
		owner = "something other than rudder"
	} else {
		owner = fmt.Sprintf("another %s (uid %s)", owner, rel.Labels[records.LabelOwnerUID])
	}
	msg := fmt.Sprintf("release %q in namespace %s belongs to %s; rudder never takes over a release it did not make for this CR: rename one of them (watches.yaml releaseName) or remove that release",
		p.relName, p.key.Namespace, owner)
	return result{verdict: blocked, reason: rstatus.ReasonReleaseNameConflict, message: msg,
		released: &condition{metav1.ConditionFalse, rstatus.ReasonReleaseNameConflict, msg}}
}

// forbidden is the result of an action the API server refused to the identity the release
// acts as (rudder's ClusterRole, or the tenant's ServiceAccount, lacks a rule for something
// the chart renders or reads). Unlike a chart error it is retried with back-off, so granting
// the rule recovers without touching the CR.
func (p *pass) forbidden(event, msg string) result { return forbidden(p.scope, event, msg) }

// request builds the Helm request of an install or upgrade, after the checks that need no
// cluster: the values against the chart's schema, and the Event that overrideValues applied.
// It returns the result to end on instead when there is no request to make.
func (p *pass) request(ctx context.Context, action plan.Action) (*helm.Request, []note, *result) {
	pinned, err := p.pinnedRelease(ctx)
	if err != nil {
		return nil, nil, &result{verdict: retry, reason: rstatus.ReasonReconcileError, err: err}
	}
	chrt := p.snap.Chart
	if pinned != nil {
		chrt = helm.ChartOf(pinned)
	}
	if err := helm.ValidateValues(chrt, p.values); err != nil {
		msg := "values do not match the chart's values.schema.json: " + err.Error()
		return nil, nil, &result{verdict: blocked, reason: rstatus.ReasonValuesInvalid, message: msg,
			released: &condition{metav1.ConditionFalse, rstatus.ReasonValuesInvalid, msg}}
	}
	var pre []note
	if len(p.overridden) > 0 {
		pre = append(pre, note{corev1.EventTypeNormal, "OverrideApplied", "Render",
			"watches.yaml overrideValues set " + strings.Join(p.overridden, ", ") + " on top of the spec"})
	}
	ch := chrt // a release decoded for this pass alone: a private copy
	if pinned == nil {
		if ch, err = p.snap.Fresh(); err != nil {
			return nil, nil, &result{verdict: retry, reason: rstatus.ReasonReconcileError, err: err}
		}
	}
	req := p.w.Watch.Request(p.obj, p.scope, p.relName, ch, p.chartDigest, p.values, p.want.ValuesDigest,
		helm.Description(string(action), p.gen, ch, p.chartDigest, p.want.ValuesDigest, p.overridden))
	req.Carried = p.carried()
	// The release's facts as the new revision leaves them if it is made (no failure held
	// back, made from this generation and chart), so that a pass that makes it writes no more;
	// a pass that fails writes the failure after (markRecord).
	f := p.factsAfter(p.out)
	failed := f
	f.Failed, f.Applied = nil, &records.Applied{Generation: p.gen, ChartDigest: p.want.ChartDigest}
	req.Facts = &f
	// As Helm leaves it failed: one failure of the pair more (see failedRecord).
	e := p.env()
	cause := rstatus.ReasonUpgradeFailed
	if action == plan.Install {
		cause = rstatus.ReasonInstallFailed
	}
	failed.Failed = &records.Failure{ChartDigest: p.want.ChartDigest, ValuesDigest: p.want.ValuesDigest, Cause: records.Cause(cause),
		Count: e.failures + 1, At: e.clock.Now()}
	req.FailedFacts = &failed
	return req, pre, nil
}
