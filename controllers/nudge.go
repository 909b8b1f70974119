package controllers

import (
	"strings"

	rstatus "github.com/rudder-operator/rudder/api/status"
)

// Annotations a person sets on a CR to act on it now, each taking effect once per value (like
// rudder.dev/rollback-to): status.release records the value handled, so the annotation may
// stay, and a tool can wait for the value there.
const (
	// AnnotationReconcileAt: "<any value>" reconciles the CR now, retrying a held-back
	// (chart, values) once: a failure whose cause was outside (a quota, an admission webhook
	// that was down) gets another try without a change to the spec or the chart.
	AnnotationReconcileAt = "rudder.dev/reconcile-at"
	// AnnotationResetAt: "<any value>" clears the failure history (status.release.failed),
	// then reconciles.
	AnnotationResetAt = "rudder.dev/reset-at"
)

// nudges folds the reconcile-at and reset-at values this pass acts on into the outcome: they
// are recorded as handled, a reset clears the held-back failure, and either lets this pass
// try the held-back pair again (see situation.heldBack). It reports whether one was due.
func (p *pass) nudges(o *outcome) bool {
	var rec record
	if v, due := p.nudgeDue(AnnotationReconcileAt, p.handled().ReconcileRequest, p.r.shadows.reconciles); due {
		rec.reconcileRequest = &v
	}
	if v, due := p.nudgeDue(AnnotationResetAt, p.handled().ResetRequest, p.r.shadows.resets); due {
		rec.resetRequest, rec.clearFailed = &v, true
	}
	if rec.reconcileRequest == nil && rec.resetRequest == nil {
		return false
	}
	o.add(nil, result{record: rec})
	return true
}

// nudgeDue returns the annotation's value and whether this pass acts on it: set, and neither
// the value the status records as handled nor one a pass behind the cache handled.
func (p *pass) nudgeDue(annotation, handled string, shadowed *shadow[string]) (string, bool) {
	v := strings.TrimSpace(p.obj.GetAnnotations()[annotation])
	if v == "" || v == handled {
		return v, false
	}
	if s, ok := shadowed.of(p.key, p.obj.GetUID()); ok && s == v {
		return v, false
	}
	return v, true
}

// handled is the status's release record as read (empty when there is none).
func (p *pass) handled() rstatus.Release {
	if p.st.Release == nil {
		return rstatus.Release{}
	}
	return *p.st.Release
}
