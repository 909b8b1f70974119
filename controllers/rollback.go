package controllers

import (
	"fmt"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	rstatus "github.com/rudder-operator/rudder/api/status"
	"github.com/rudder-operator/rudder/internal/helm"
)

// AnnotationRollbackTo: "<revision>" makes rudder roll the CR's release back to that revision of
// its history, once per value (status.release.rollbackRequest records the value handled, so
// the annotation may stay). The rollback then holds like one made with `helm rollback`.
const AnnotationRollbackTo = "rudder.dev/rollback-to"

// rollbackRequest is the rollback-to value handled so far.
func (p *pass) rollbackRequest() string {
	if p.st.Release == nil {
		return ""
	}
	return p.st.Release.RollbackRequest
}

// requestedRollback acts on a new value of the rollback-to annotation: a rollback to that
// revision (a new revision whose description names the request), or, for a revision the
// history does not hold, a refusal. Either way the RollbackRequest condition and an Event say
// what became of it. Only a transient failure leaves the value to be tried again.
func (p *pass) requestedRollback(o *outcome) {
	v, due := p.rollbackDue()
	if !due {
		return
	}
	if handled, ok := p.r.rollbacks.of(p.key, p.obj.GetUID()); ok && handled == v {
		// Handled by a pass whose status write the cache does not show yet.
		p.markRollbackHandled(v)
		return
	}
	to, err := strconv.Atoi(v)
	var target *helm.Head
	if err == nil && to > 0 {
		rel, err := p.r.opts.Helm.Revision(p.scope, p.relName, to)
		if err != nil {
			o.fail(rstatus.ReasonReconcileError, fmt.Errorf("reading revision %d of %s: %w", to, p.relName, err))
			return
		}
		target = helm.HeadOf(rel)
	}
	p.markRollbackHandled(v)
	if target == nil || target.OwnerUID != p.want.OwnerUID {
		msg := fmt.Sprintf("%s=%q names no revision of release %s (see helm history %s -n %s); nothing was done",
			AnnotationRollbackTo, v, p.relName, p.relName, p.key.Namespace)
		o.note(corev1.EventTypeWarning, rstatus.ReasonRollbackRejected, "Rollback", msg)
		o.rollbackRequest = &condition{metav1.ConditionFalse, rstatus.ReasonRollbackRejected, msg}
		return
	}
	desc := fmt.Sprintf("rudder rollback to revision %d: requested by %s=%q", to, AnnotationRollbackTo, v)
	if err := p.r.opts.Helm.Rollback(p.scope, p.relName, to, p.r.opts.Watch.HistoryLimit(), desc); err != nil {
		releaseActions.WithLabelValues(p.r.gvkLabel(), "rollback", "failed").Inc()
		if isTransient(err) {
			// Try this value again.
			p.st.Release.RollbackRequest = ""
			p.r.rollbacks.forget(p.key)
			o.fail(rstatus.ReasonRollbackFailed, fmt.Errorf("rolling back %s to revision %d: %w", p.relName, to, err))
			return
		}
		msg := fmt.Sprintf("rolling back %s to revision %d as %s asks: %v", p.relName, to, AnnotationRollbackTo, err)
		o.note(corev1.EventTypeWarning, rstatus.ReasonRollbackFailed, "Rollback", msg)
		o.rollbackRequest = &condition{metav1.ConditionFalse, rstatus.ReasonRollbackFailed, msg}
		return
	}
	releaseActions.WithLabelValues(p.r.gvkLabel(), "rollback", "ok").Inc()
	msg := fmt.Sprintf("rolled back to revision %d as %s=%q asks; it holds until the spec or the chart changes", to, AnnotationRollbackTo, v)
	o.note(corev1.EventTypeNormal, rstatus.ReasonRolledBack, "Rollback", msg)
	o.rollbackRequest = &condition{metav1.ConditionTrue, rstatus.ReasonRolledBack, msg}
	// The state decision sees it as any rollback: the newest revision, not made from the spec.
	p.rolledBack = true
}

// markRollbackHandled records that the rollback-to value v was handled, in the status and its
// shadow.
func (p *pass) markRollbackHandled(v string) {
	p.releaseStatus().RollbackRequest = v
	p.r.rollbacks.remember(p.key, p.obj.GetUID(), v)
}

// keepRollback keeps a deployed revision that rudder did not make from the spec (helm
// rollback, or rudder.dev/rollback-to), because neither the CR's generation nor the chart has
// changed since rudder's newest own revision: no revert, no new revision.
func (p *pass) keepRollback(obs observed, o *outcome) {
	h, rel := obs.head, obs.rel
	o.phase, o.reason, o.head, o.rel = phaseRolledBack, rstatus.ReasonManualRollback, h, rel
	to := h.RolledBackTo()
	if to == 0 && rel != nil && rel.Info != nil {
		// Helm's own description of a rollback to a revision without rudder's label.
		_, _ = fmt.Sscanf(rel.Info.Description, "Rollback to %d", &to)
	}
	st := p.releaseStatus()
	seen := st.Revision == h.Revision && st.RolledBackTo == to
	st.Name, st.Revision, st.RolledBackTo = p.relName, h.Revision, to
	st.ChartDigest, st.ValuesDigest, st.Failed = h.ChartDigest, h.ValuesDigest, nil
	if !seen {
		st.Chart = ""
	}
	if st.Chart == "" {
		if rel == nil {
			var err error
			if rel, err = p.r.opts.Helm.Last(p.scope, p.relName); err != nil {
				o.fail(rstatus.ReasonReconcileError, fmt.Errorf("reading release %s: %w", p.relName, err))
				return
			}
		}
		if rel != nil && rel.Chart != nil && rel.Chart.Metadata != nil {
			st.Chart = helm.ChartRef(rel.Chart)
		}
		o.rel = rel
	}
	p.r.failures.forget(p.key)
	target := "a revision rudder did not make from the spec"
	if to > 0 {
		target = fmt.Sprintf("revision %d", to)
	}
	msg := fmt.Sprintf("revision %d is a rollback to %s; it holds until the spec or the chart changes", h.Revision, target)
	if !seen && !p.rolledBack {
		o.note(corev1.EventTypeNormal, rstatus.ReasonManualRollback, "Rollback", msg)
	}
	o.released = &condition{metav1.ConditionTrue, rstatus.ReasonManualRollback, msg}
}
