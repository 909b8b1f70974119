package machine

// nudges folds the reconcile-at and reset-at values this pass acts on into the outcome: they
// are recorded as handled, a reset clears the held-back failure, and either lets this pass
// try the held-back pair again (see situation.heldBack). It reports whether one was due.
func (ac *actor) nudges(o *outcome) bool {
	var rec record
	f := ac.facts()
	if v, due := ac.requestDue(AnnotationReconcileAt, f.ReconcileAt); due {
		rec.reconcileRequest = &v
	}
	if v, due := ac.requestDue(AnnotationResetAt, f.ResetAt); due {
		rec.resetRequest, rec.clearFailed, ac.reset = &v, true, true
	}
	if rec.reconcileRequest == nil && rec.resetRequest == nil {
		return false
	}
	o.add(nil, result{record: rec})
	return true
}
