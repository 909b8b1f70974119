package machine

// The annotations a person sets on a CR to steer its release. The once-per-value ones
// (rollback-to, reconcile-at, reset-at) take effect once for each value: the release's newest
// record keeps the value handled (hashed: see records.Facts) and status.release reports it,
// so the annotation may stay, and a tool can wait for the value there.
const (
	// AnnotationPaused: "true" stops every action on the CR's release (condition Paused), so
	// that a person can `helm rollback` by hand. Removing it resumes.
	AnnotationPaused = "rudder.dev/paused"
	// AnnotationRollbackTo: "<revision>" (or "<revision>@<anything>", such as the time
	// `rudder rollback` writes: see RollbackValue) makes rudder roll the CR's release back to
	// that revision of its history, once per value (status.release.rollbackRequest reports the
	// value handled). The rollback then holds like one made with `helm rollback`.
	AnnotationRollbackTo = "rudder.dev/rollback-to"
	// AnnotationReconcileAt: "<any value>" reconciles the CR now, retrying a held-back
	// (chart, values) once: a failure whose cause was outside (a quota, an admission webhook
	// that was down) gets another try without a change to the spec or the chart.
	AnnotationReconcileAt = "rudder.dev/reconcile-at"
	// AnnotationResetAt: "<any value>" clears the failure history (status.release.failed),
	// then reconciles.
	AnnotationResetAt = "rudder.dev/reset-at"
	// AnnotationRolloutHold: "true" keeps the CR on the chart its release has while rollouts
	// move the rest of the kind; removing it lets the CR join (the Rollout condition says so).
	AnnotationRolloutHold = "rudder.dev/rollout-hold"
	// AnnotationOnDelete: "keep" leaves the CR's release and objects in place when the CR is
	// deleted, for whoever manages them next (plain Helm, another operator): rudder takes its
	// marks and the CR's owner reference off them and uninstalls nothing (plan.LetGo). Read
	// when the CR is deleted; any other value uninstalls, as without it.
	AnnotationOnDelete = "rudder.dev/on-delete"
)
