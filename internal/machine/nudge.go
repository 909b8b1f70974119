package machine

// Annotations a person sets on a CR to act on it now, each taking effect once per value (like
// rudder.dev/rollback-to): the release's newest record keeps the value handled (hashed: see
// records.Facts) and status.release reports it, so the annotation may stay, and a tool can
// wait for the value there.
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
	f := p.facts()
	if v, due := p.requestDue(AnnotationReconcileAt, f.ReconcileAt); due {
		rec.reconcileRequest = &v
	}
	if v, due := p.requestDue(AnnotationResetAt, f.ResetAt); due {
		rec.resetRequest, rec.clearFailed, p.reset = &v, true, true
	}
	if rec.reconcileRequest == nil && rec.resetRequest == nil {
		return false
	}
	o.add(nil, result{record: rec})
	return true
}
