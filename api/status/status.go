package status

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
)

// Condition types rudder sets on every CR.
const (
	// Ready is True when the release is deployed from the current spec and chart and all of its
	// objects are ready (kstatus Current). `kubectl wait --for=condition=Ready` waits for it.
	TypeReady = "Ready"
	// Reconciling is True while rudder is still working towards Ready (kstatus).
	TypeReconciling = "Reconciling"
	// Stalled is True when rudder cannot make progress without a change to the CR, the chart or
	// the cluster (kstatus).
	TypeStalled = "Stalled"
	// Released says what happened to the Helm release last.
	TypeReleased = "Released"
	// ChartReady is False while the chart on disk fails to load or lint (the last good version
	// stays in use).
	TypeChartReady = "ChartReady"
	// Paused is True while the rudder.dev/paused annotation stops all actions.
	TypePaused = "Paused"
	// RollbackRequest says what became of the last value of the rudder.dev/rollback-to
	// annotation: True when rudder rolled back to that revision, False when it refused.
	TypeRollbackRequest = "RollbackRequest"
	// TypeTested is the outcome of the release's tests (the chart's helm.sh/hook: test hooks)
	// on the revision status.release.tested names, when the watch runs them (test.enable).
	// It is separate from Ready, which is about the objects.
	TypeTested = "Tested"
	// TypeDrifted is what the last look at the release's objects found, when the watch's
	// driftDetection.mode is warn: True naming each object and field that differs from the
	// manifest (nothing is restored), False when none does.
	TypeDrifted = "Drifted"
	// TypeRollout is where the watch's rollouts leave the CR, when the watch has a rollout
	// policy: True when its release is on the watch's chart or moving to it, False while a
	// rollout has not reached it, holds it (rudder.dev/rollout-hold) or halted.
	TypeRollout = "Rollout"
)

// Reasons of the Rollout condition.
const (
	ReasonRolloutCurrent = "RolloutCurrent"
	ReasonRolloutWaiting = "RolloutWaiting"
	ReasonRolloutHeld    = "RolloutHeld"
	ReasonRolloutHalted  = "RolloutHalted"
	ReasonRolloutKept    = "RolloutKept"
)

// RudderOwns reports whether rudder owns a condition type: it writes those on every pass, and a
// Go hook's edit of one is not kept. Every other type in status.conditions is a hook's own
// (the Application hook could add "Available"): rudder keeps it as the hook last set it.
func RudderOwns(conditionType string) bool {
	switch conditionType {
	case TypeReady, TypeReconciling, TypeStalled, TypeReleased, TypeChartReady, TypePaused, TypeRollbackRequest, TypeTested, TypeDrifted,
		TypeRollout:
		return true
	}
	return false
}

// Condition reasons.
const (
	ReasonInstallSucceeded = "InstallSucceeded"
	ReasonInstallFailed    = "InstallFailed"
	ReasonUpgradeSucceeded = "UpgradeSucceeded"
	ReasonUpgradeFailed    = "UpgradeFailed"
	ReasonRolledBack       = "RolledBack"
	ReasonRollbackFailed   = "RollbackFailed"
	// ReasonTestSucceeded and ReasonTestFailed: every test hook of the revision succeeded; one
	// failed (the message names each that did).
	ReasonTestSucceeded = "TestSucceeded"
	ReasonTestFailed    = "TestFailed"
	// ReasonManualRollback: the deployed revision is a rollback rudder did not make from the
	// spec (helm rollback, or rudder.dev/rollback-to); it holds until the spec or the chart
	// changes.
	ReasonManualRollback = "ManualRollback"
	// ReasonPendingOperation: the newest revision is pending in an operation rudder did not
	// start (a person's helm rollback or upgrade), which may still be running; rudder waits
	// for it before unlocking it.
	ReasonPendingOperation = "PendingOperation"
	// ReasonRollbackRejected: the rudder.dev/rollback-to value names no revision of the
	// release's history; nothing was done.
	ReasonRollbackRejected = "RollbackRejected"
	// ReasonAdopted: a shard took over a CR moved to it (relabelled): the carried labels of
	// its release records and operands were rewritten, with no new revision.
	ReasonAdopted        = "Adopted"
	ReasonUnlocked       = "Unlocked"
	ReasonUpToDate       = "UpToDate"
	ReasonDriftCorrected = "DriftCorrected"
	// ReasonDriftDetected and ReasonNoDrift: Drifted's reasons (driftDetection.mode warn).
	ReasonDriftDetected = "DriftDetected"
	ReasonNoDrift       = "NoDrift"
	// ReasonRetryScheduled: a failed install or upgrade is tried again after a back-off
	// (remediation.retries); Released says how it failed.
	ReasonRetryScheduled = "RetryScheduled"
	// ReasonReplaced: an upgrade with upgrade.force deleted and created an object whose update
	// the API server refused as changing an immutable field (an Event per object).
	ReasonReplaced = "Replaced"
	// ReasonCRDsApplied: an upgrade created or replaced CustomResourceDefinitions of the
	// chart's crds/ (crds.upgrade), named in the Event.
	ReasonCRDsApplied = "CRDsApplied"
	// ReasonLookupWithheld: a render's lookups read objects the release did not make, which
	// the watch's allowReads does not name, as not found (named in a Warning Event).
	ReasonLookupWithheld = "LookupWithheld"
	// ReasonValuesFromUnclaimed: a valuesFrom source whose name comes from the CR does not say
	// it is meant for the CR (annotation rudder.dev/values-for); nothing is released.
	ReasonValuesFromUnclaimed = "ValuesFromUnclaimed"
	ReasonValuesInvalid       = "ValuesInvalid"
	// ReasonValuesFromMissing: a valuesFrom source that is not optional is missing (its
	// object or its key); nothing is released until it exists.
	ReasonValuesFromMissing = "ValuesFromMissing"
	ReasonChartInvalid      = "ChartInvalid"
	// ReasonPostRenderFailed: the watch's post-renderers or common metadata failed on what the
	// chart rendered (the message names the patch and its target); nothing was applied.
	ReasonPostRenderFailed    = "PostRenderFailed"
	ReasonChartLoaded         = "ChartLoaded"
	ReasonReleaseNameConflict = "ReleaseNameConflict"
	ReasonPaused              = "Paused"
	ReasonResumed             = "Resumed"
	ReasonHookFailed          = "HookFailed"
	ReasonHeld                = "Held"
	// ReasonDependencyNotReady: a CR this one depends on (rudder.dev/depends-on, the watch's
	// dependsOn) is missing or not ready; no install or upgrade is made until it is, and its
	// change takes this CR again.
	ReasonDependencyNotReady = "DependencyNotReady"
	// ReasonDependencyInvalid: a dependency the CR names is malformed or not allowed by its
	// watch (another kind, another namespace); the message names the entry.
	ReasonDependencyInvalid = "DependencyInvalid"
	// ReasonDependencyCycle: the CR's dependencies lead back to it; the message names the
	// cycle. Nothing is released until one of its CRs stops depending on the next.
	ReasonDependencyCycle = "DependencyCycle"
	// ReasonDependentsRemain: a deleted CR annotated rudder.dev/delete-after-dependents waits
	// for the CRs that depend on it to be deleted (Ready names them), at most its bound; a
	// Warning Event of this reason says it was uninstalled while some remained.
	ReasonDependentsRemain = "DependentsRemain"
	ReasonProgressing      = "Progressing"
	ReasonObjectsReady     = "ObjectsReady"
	ReasonObjectFailed     = "ObjectFailed"
	ReasonReconcileError   = "ReconcileError"
	ReasonUninstallFailed  = "UninstallFailed"
	// ReasonForbidden: rudder's identity may not act on an object the chart renders. Retried
	// with back-off, so granting the missing rule recovers without touching the CR.
	ReasonForbidden = "Forbidden"
	// ReasonSuperseded: older revisions still marked deployed next to the newest (an update of
	// their records was lost while Helm replaced them) were marked superseded.
	ReasonSuperseded = "Superseded"
)

// Common is the part of status rudder owns on every CR.
type Common struct {
	// Conditions: Ready, Reconciling, Stalled (kstatus), Released, ChartReady, Paused,
	// RollbackRequest, Tested (rudder's; see RudderOwns), and the kind's Go hooks' own types.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// ObservedGeneration is the generation of the spec the last completed pass acted on.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Release is the Helm release that holds this CR's operands.
	// +optional
	Release *Release `json:"release,omitempty"`
	// Inventory is the objects of the release's deployed revision.
	// +optional
	Inventory *Inventory `json:"inventory,omitempty"`
}

// Release describes the Helm release of a CR.
type Release struct {
	// Name of the release (`helm history <name> -n <namespace>`).
	Name string `json:"name"`
	// Revision deployed (0 when none is).
	// +optional
	Revision int `json:"revision,omitempty"`
	// Chart as name-version.
	// +optional
	Chart string `json:"chart,omitempty"`
	// ChartDigest is the content digest of the chart the revision was made from.
	// +optional
	ChartDigest string `json:"chartDigest,omitempty"`
	// ValuesDigest is the digest of the values the revision was made from.
	// +optional
	ValuesDigest string `json:"valuesDigest,omitempty"`
	// Failed records the chart and values that failed to install or upgrade; rudder does not
	// retry them until the spec or the chart changes.
	// +optional
	Failed *FailedRelease `json:"failed,omitempty"`
	// RolledBackTo is the revision the deployed revision is a rollback to, when it is one.
	// +optional
	RolledBackTo int `json:"rolledBackTo,omitempty"`
	// Applied is what rudder's newest install or upgrade was made from. A deployed revision
	// rudder did not make from the spec (a rollback) is kept while the CR's generation and the
	// chart digest are still these.
	// +optional
	Applied *AppliedRelease `json:"applied,omitempty"`
	// RollbackRequest is the last value of the rudder.dev/rollback-to annotation that rudder
	// handled: each value is acted on once, so the annotation may stay as a record.
	// +optional
	RollbackRequest string `json:"rollbackRequest,omitempty"`
	// ReconcileRequest and ResetRequest are the last values of the rudder.dev/reconcile-at and
	// rudder.dev/reset-at annotations that rudder handled (Flux's lastHandledReconcileAt):
	// each value is acted on once, so a tool can wait for its value here.
	// +optional
	ReconcileRequest string `json:"reconcileRequest,omitempty"`
	// +optional
	ResetRequest string `json:"resetRequest,omitempty"`
	// Tested is the outcome of the last run of the release's tests.
	// +optional
	Tested *TestedRelease `json:"tested,omitempty"`
}

// TestedRelease is the outcome of one run of a revision's tests.
type TestedRelease struct {
	// Revision tested.
	Revision int `json:"revision"`
	// Result is Succeeded or Failed.
	Result string `json:"result"`
	// Failed names the test hooks that failed.
	// +optional
	Failed []string `json:"failed,omitempty"`
	// At is when the run ended (a watch's test.interval runs the tests again).
	// +optional
	At *metav1.Time `json:"at,omitempty"`
}

// Results of a test run.
const (
	TestSucceeded = "Succeeded"
	TestFailed    = "Failed"
)

// AppliedRelease is what a revision rudder made from the spec was made from.
type AppliedRelease struct {
	// Revision rudder made.
	Revision int `json:"revision"`
	// Generation of the CR it was made from.
	Generation int64 `json:"generation"`
	// ChartDigest of the chart it was made from.
	ChartDigest string `json:"chartDigest"`
}

// FailedRelease is a (chart, values) pair that failed.
type FailedRelease struct {
	ChartDigest  string `json:"chartDigest"`
	ValuesDigest string `json:"valuesDigest"`
	// Reason is why it failed, as Stalled said when it did (InstallFailed, UpgradeFailed,
	// ChartInvalid, TestFailed).
	// +optional
	Reason string `json:"reason,omitempty"`
	// Message is Helm's error.
	Message string `json:"message,omitempty"`
	// Failures counts the failures of this (chart, values) in a row: remediation.retries
	// tries it again until it has failed retries+1 times.
	// +optional
	Failures int `json:"failures,omitempty"`
	// LastFailure is when it failed last; a retry is due a back-off after it.
	// +optional
	LastFailure *metav1.Time `json:"lastFailure,omitempty"`
}

// ConditionsOf reads status.conditions of a CR held as unstructured (what rudder's
// reconcilers and tests read); entries that do not parse are skipped. It reads the fields
// directly rather than through the reflection-based converter: every pass reads them.
func ConditionsOf(obj *unstructured.Unstructured) []metav1.Condition {
	raw, ok, _ := unstructured.NestedFieldNoCopy(obj.Object, "status", "conditions")
	list, _ := raw.([]any)
	if !ok || list == nil {
		return nil
	}
	out := make([]metav1.Condition, 0, len(list))
	for _, c := range list {
		if m, ok := c.(map[string]any); ok {
			if cond, ok := conditionOf(m); ok {
				out = append(out, cond)
			}
		}
	}
	return out
}

// SetConditions writes status.conditions of a CR held as unstructured, as a Go hook edits its
// own condition types (see RudderOwns).
func SetConditions(obj *unstructured.Unstructured, conds []metav1.Condition) error {
	list := make([]any, 0, len(conds))
	for i := range conds {
		m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&conds[i])
		if err != nil {
			return err
		}
		list = append(list, m)
	}
	return unstructured.SetNestedSlice(obj.Object, list, "status", "conditions")
}

func conditionOf(m map[string]any) (metav1.Condition, bool) {
	var c metav1.Condition
	typ, ok := m["type"].(string)
	if !ok || typ == "" {
		return c, false
	}
	c.Type = typ
	s, _ := m["status"].(string)
	c.Status = metav1.ConditionStatus(s)
	c.Reason, _ = m["reason"].(string)
	c.Message, _ = m["message"].(string)
	c.ObservedGeneration = int64(intOf(m["observedGeneration"]))
	if t, ok := m["lastTransitionTime"].(string); ok && t != "" {
		if err := c.LastTransitionTime.UnmarshalQueryParameter(t); err != nil {
			return c, false
		}
	}
	return c, true
}
