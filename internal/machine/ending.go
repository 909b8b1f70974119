package machine

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	rstatus "github.com/rudder-operator/rudder/api/status"
	"github.com/rudder-operator/rudder/internal/helm"
	"github.com/rudder-operator/rudder/internal/libtext"
	"github.com/rudder-operator/rudder/internal/plan"
	"github.com/rudder-operator/rudder/internal/records"
	"github.com/rudder-operator/rudder/internal/release"
)

// ending is how a pass ends when plan.Next chooses no action (plan.Ending): the result it
// ends on, from what the pass observed and what its actions left.
type ending struct {
	sub *subject
	obs *observation
}

// resultOf is the result a pass ends on as plan.Next says it ends, on the release as rel has it
// and the situation s it decided from, after the steps of o.
func (en ending) resultOf(how plan.Ending, rel observed, s plan.Situation, o *outcome) result {
	switch how {
	case plan.EndHeld:
		return en.hold(rel)
	case plan.EndDependencies:
		return en.waitForDependencies()
	case plan.EndInSync:
		return en.inSync(rel.head)
	case plan.EndRolledBack:
		return en.keepRollback(rel, o)
	case plan.EndConflict:
		return en.conflict(rel)
	case plan.EndHeldBack:
		return en.holdBack(rel, s, o)
	case plan.EndWaiting:
		return en.waitForOperation(rel.rel)
	case plan.EndRetrying:
		return en.retryLater(o)
	}
	if made := o.madeStep(); made != nil {
		return made.result
	}
	if last := o.last(); last != nil {
		return last.result
	}
	return result{verdict: retry, reason: rstatus.ReasonReconcileError, err: fmt.Errorf("release %s: the pass ended with nothing to report",
		en.obs.relName)}
}

// hold ends a pass a pre-release hook holds: no action, the objects of the newest revision
// (when this CR made one) still looked at.
func (en ending) hold(obs observed) result {
	reason := rstatus.ReasonHeld
	if en.obs.held.Reason != "" {
		reason = en.obs.held.Reason // the hook's own word for it ("Scheduled", "Done")
	}
	prev := metav1.ConditionFalse
	if c := en.sub.cond(rstatus.TypeReleased); c != nil {
		prev = c.Status
	}
	res := result{verdict: succeeded, phase: phaseHeld, reason: reason, message: en.obs.held.Message,
		released: &condition{prev, reason, en.obs.held.Message}, requeue: en.obs.held.RequeueAfter}
	if h := obs.head; h != nil && h.OwnerUID == en.obs.want.OwnerUID {
		res.head, res.rel = h, obs.rel
	}
	return res
}

// waitForDependencies ends a pass whose install or upgrade waits for the CRs the CR depends
// on: no action, Released as it was, and an Event when the CR starts waiting. A change of a
// dependency takes the CR again (the controllers' dependency watch).
func (en ending) waitForDependencies() result {
	msg := "waiting for " + en.obs.waitsFor
	prev := metav1.ConditionFalse
	if c := en.sub.cond(rstatus.TypeReleased); c != nil {
		prev = c.Status
	}
	res := result{verdict: succeeded, phase: phaseWaiting, reason: rstatus.ReasonDependencyNotReady, message: msg,
		released: &condition{prev, rstatus.ReasonDependencyNotReady, msg}}
	if c := en.sub.cond(rstatus.TypeReady); c == nil || c.Reason != rstatus.ReasonDependencyNotReady {
		res.notes = []note{{corev1.EventTypeNormal, rstatus.ReasonDependencyNotReady, "Wait", msg}}
	}
	return res
}

// holdBack ends a pass on a desired (chart, values) that failed: in this pass (the result
// says what became of it), or in an earlier one. It is not tried again until one of them
// changes; a failure the API server's refusal caused is retried with back-off.
func (en ending) holdBack(obs observed, s plan.Situation, o *outcome) result {
	f := o.failure
	if f == nil {
		held := en.obs.heldBack
		reason := held.reason
		if reason == "" {
			reason = en.failureReason(o)
		}
		msg := fmt.Sprintf("chart %s with values %s failed and is not retried until the spec or the chart changes: %s",
			records.DisplayDigest(en.obs.want.ChartDigest), records.DisplayDigest(en.obs.want.ValuesDigest), held.failed.Message)
		// Written again: a no-op.
		res := result{verdict: failed, reason: reason, message: msg, record: record{failed: held}}
		// Released keeps what happened to the release last (RolledBack, InstallFailed, …) when
		// it says so already.
		if c := en.sub.cond(rstatus.TypeReleased); o.released == nil && (c == nil || c.Status != metav1.ConditionFalse) {
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
			return forbidden(en.sub.scope, "Upgrade", msg)
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
		return forbidden(en.sub.scope, eventAction(f.action), msg)
	}
	return result{verdict: failed, reason: res.reason, message: msg, released: &condition{metav1.ConditionFalse, res.reason, msg}}
}

// failureReason is the reason Released gives for a held-back failure of an earlier pass whose
// record has none (one rudder made before 647f429): as this pass set it, else as the CR had
// it. The fallback can go when no release's newest revision is that old.
func (en ending) failureReason(o *outcome) string {
	c := o.released
	if c == nil {
		if prev := en.sub.cond(rstatus.TypeReleased); prev != nil {
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

// waitForOperation ends a pass on another operation's pending revision.
func (en ending) waitForOperation(rel *release.Release) result {
	age := en.sub.w.Clock.Since(rel.LastDeployed)
	msg := fmt.Sprintf("revision %d is %s by an operation rudder did not start (%q); waiting up to %s from its start before unlocking it",
		rel.Version, rel.Status, rel.Description, ForeignPendingGrace)
	return result{verdict: blocked, reason: rstatus.ReasonPendingOperation, message: msg,
		released: &condition{metav1.ConditionFalse, rstatus.ReasonPendingOperation, msg},
		requeue:  Jitter(min(ForeignPendingGrace-age, 30*time.Second))}
}

// inSync ends a pass on a revision deployed from exactly what the spec and chart give now.
func (en ending) inSync(h *records.Head) result {
	res := result{verdict: succeeded, phase: phaseInSync, reason: rstatus.ReasonUpToDate, head: h}
	// The action that made this revision, as its record says; a record rudder made before
	// af27a7e does not, and its CR's condition does.
	switch h.MadeBy() {
	case records.ActionInstall:
		res.reason = rstatus.ReasonInstallSucceeded
	case records.ActionUpgrade:
		res.reason = rstatus.ReasonUpgradeSucceeded
	default:
		if c := en.sub.cond(rstatus.TypeStalled); c != nil && c.Status == metav1.ConditionFalse &&
			(c.Reason == rstatus.ReasonInstallSucceeded || c.Reason == rstatus.ReasonUpgradeSucceeded) {
			res.reason = c.Reason
		}
	}
	en.sub.log.V(1).Info("release in sync", "release", en.obs.relName, "revision", h.Revision)
	rec := &revisionRecord{number: h.Revision, chartDigest: h.ChartDigest, valuesDigest: h.ValuesDigest, rolledBackTo: h.RolledBackTo()}
	st := en.sub.read.Release
	if st != nil && st.Name == en.obs.relName && st.Revision == h.Revision {
		rec.chart, rec.chartDigest, rec.valuesDigest = st.Chart, st.ChartDigest, st.ValuesDigest
	}
	if rec.chart == "" {
		rec.chart = helm.ChartRef(en.obs.snap.Chart)
	}
	// What rudder would make is this revision.
	if a := en.obs.facts.Applied; a == nil || a.Generation != en.sub.gen || a.ChartDigest != en.obs.want.ChartDigest || stApplied(st) == nil {
		rec.applied = &rstatus.AppliedRelease{Revision: h.Revision, Generation: en.sub.gen, ChartDigest: en.obs.want.ChartDigest}
	}
	res.record = record{revision: rec, clearFailed: true}
	// Keep the message of the install or upgrade that made the revision, unless it is about an
	// older generation (a pass that read the CR from a cache behind the upgrade's status).
	if c := en.sub.cond(rstatus.TypeReleased); c == nil || c.Status != metav1.ConditionTrue || c.Reason == rstatus.ReasonManualRollback ||
		c.ObservedGeneration < en.sub.gen {
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
func (en ending) conflict(obs observed) result {
	rel := obs.rel
	owner := rel.Labels[records.LabelOwnerKind]
	if owner == "" {
		owner = "something other than rudder"
	} else {
		owner = fmt.Sprintf("another %s (uid %s)", owner, rel.Labels[records.LabelOwnerUID])
	}
	msg := fmt.Sprintf("release %q in namespace %s belongs to %s; rudder never takes over a release it did not make for this CR: rename one "+
		"of them (watches.yaml releaseName) or remove that release",
		en.obs.relName, en.sub.key.Namespace, owner)
	if p := obs.proof; p != nil && p.Why != "" && rel.Labels[records.LabelOwnerUID] == "" {
		msg = fmt.Sprintf("release %q in namespace %s was made by something other than rudder, and does not prove it is this CR's: %s; "+
			"rudder takes a release over only when every object of its newest deployed revision that exists carries an owner reference to the CR "+
			"(or, where none can point at it, the annotations %s and %s naming it), as operator-sdk's and HOP's helm-operators write them",
			en.obs.relName, en.sub.key.Namespace, p.Why, helm.AnnotationPrimaryResource, helm.AnnotationPrimaryResourceType)
	}
	return result{verdict: blocked, reason: rstatus.ReasonReleaseNameConflict, message: msg,
		released: &condition{metav1.ConditionFalse, rstatus.ReasonReleaseNameConflict, msg}}
}

// retryLater ends a pass on a failure with retries left: waiting for its back-off, Stalled
// False, Released as the failure left it.
func (en ending) retryLater(o *outcome) result {
	f := o.recordedFailure()
	if f == nil {
		f = en.obs.heldBack
	}
	wait, want := max(retryIn(f, en.sub.w.Clock), time.Second), en.obs.want
	n, retries := failures(f), en.sub.w.Watch.Policies().Retries()
	msg := fmt.Sprintf("chart %s with values %s failed %d of at most %d times (remediation.retries %d); trying again in %s: %s",
		records.DisplayDigest(want.ChartDigest), records.DisplayDigest(want.ValuesDigest), n, retries+1, retries, wait.Round(time.Second),
		f.failed.Message)
	res := result{verdict: blocked, phase: phaseRetrying, reason: rstatus.ReasonRetryScheduled, message: msg, requeue: wait,
		record: record{failed: f}}
	if c := en.sub.cond(rstatus.TypeReleased); o.released == nil && (c == nil || c.Status != metav1.ConditionFalse) {
		res.released = &condition{metav1.ConditionFalse, f.reason, msg}
	}
	return res
}

// keepRollback ends a pass on a deployed revision rudder did not make from the spec (helm
// rollback, or rudder.dev/rollback-to), because neither the CR's generation nor the chart has
// changed since rudder's newest own revision: no revert, no new revision.
func (en ending) keepRollback(obs observed, o *outcome) result {
	h, rel := obs.head, obs.rel
	st := en.sub.read.Release
	seen := rollbackReported(en.sub, h)
	to, chart := h.RolledBackTo(), ""
	switch {
	case seen:
		to, chart = st.RolledBackTo, st.Chart
	case rel != nil:
		// The record says what the revision is: Helm's description of a rollback names where
		// to (a rollback to a revision without rudder's label, an adopted one or a helm
		// upgrade's, has no other trace), and a helm upgrade carries the labels of the record
		// before it, which then name another revision as if it were a rollback to it. The
		// cache of records holds no description: the observer reads storage for a rollback
		// not reported yet.
		if n, ok := libtext.HelmRollbackTarget(rel.Description); ok {
			to = n
		} else if libtext.HelmUpgraded(rel.Description) {
			to = 0
		}
		chart = rel.Chart.Ref()
	}
	msg := fmt.Sprintf("revision %d is a rollback to revision %d; it holds until the spec or the chart changes", h.Revision, to)
	if to == 0 {
		msg = fmt.Sprintf("revision %d was made without rudder (a helm upgrade, or a rollback to a revision rudder did not make "+
			"from the spec); it holds until the spec or the chart changes", h.Revision)
	}
	res := result{verdict: succeeded, phase: phaseRolledBack, reason: rstatus.ReasonManualRollback, head: h, rel: rel,
		released: &condition{metav1.ConditionTrue, rstatus.ReasonManualRollback, msg},
		record: record{clearFailed: true, revision: &revisionRecord{number: h.Revision, chart: chart, chartDigest: h.ChartDigest,
			valuesDigest: h.ValuesDigest, rolledBackTo: to}}}
	if !seen && !o.rolledBackOnRequest() {
		res.notes = []note{{corev1.EventTypeNormal, rstatus.ReasonManualRollback, "Rollback", msg}}
	}
	return res
}
