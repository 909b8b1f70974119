package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Phases of a Rollout.
const (
	// PhaseProgressing: a wave is under way, or waits for its CRs to be Ready and settle.
	PhaseProgressing = "Progressing"
	// PhasePaused: no further wave starts until the rudder.dev/paused annotation goes.
	PhasePaused = "Paused"
	// PhaseHalted: more CRs failed than the policy's maxFailures (or it was aborted); no
	// further CR moves. With onHalt rollback, the moved CRs are being rolled back.
	PhaseHalted = "Halted"
	// PhaseRolledBack: halted, and every moved CR is back on a revision of an earlier chart.
	PhaseRolledBack = "RolledBack"
	// PhaseComplete: every CR that is not held runs the new chart and is Ready.
	PhaseComplete = "Complete"
	// PhaseSuperseded: a newer chart edit started a rollout of its own before this one ended.
	PhaseSuperseded = "Superseded"
)

// Annotations a person sets on a Rollout.
const (
	// AnnotationPaused "true" pauses a progressing rollout; removing it resumes.
	AnnotationPaused = "rudder.dev/paused"
	// AnnotationPromote "<any value>" skips the gates of the current wave once per value: the
	// next wave starts without waiting for its CRs to be Ready and to settle.
	AnnotationPromote = "rudder.dev/promote"
	// AnnotationAbort "true" halts the rollout now, with the policy's onHalt.
	AnnotationAbort = "rudder.dev/abort"
	// AnnotationPreview is what `rudder diff --cluster --record` found the edit does to the
	// CRs (a Preview, as JSON). A rollout of a policy that starts paused resumes only once it
	// is recorded.
	AnnotationPreview = "rudder.dev/preview"
)

// Preview is the summary of a chart edit's diff that `rudder diff --cluster --record` records
// on the Rollout it previews.
type Preview struct {
	// CRs is how many CRs of the kind the diff looked at; Changed, Unchanged and Failing how
	// many of them the edit changes, leaves as they are, and makes fail (not render, break
	// the watch's confinement or a limit).
	CRs       int `json:"crs"`
	Changed   int `json:"changed"`
	Unchanged int `json:"unchanged"`
	Failing   int `json:"failing"`
	// At is when the diff ran.
	At metav1.Time `json:"at"`
}

// RolloutSpec says which chart edit of which watch the rollout moves the CRs to. rudder writes
// it when it sees the edit; it does not change afterwards.
type RolloutSpec struct {
	// Group, Version and Kind are the watch's: the CRs the rollout moves.
	Group   string `json:"group"`
	Version string `json:"version"`
	Kind    string `json:"kind"`
	// Shard is the label selector of the rudder replica that runs the rollout, when rudder
	// runs sharded (--watch-label-selector): each shard moves its own CRs.
	// +optional
	Shard string `json:"shard,omitempty"`
	// From is the chart digest most CRs were on when the rollout started (the release
	// records' rudder.dev/chart-digest form); To is the new one.
	// +optional
	From string `json:"from,omitempty"`
	To   string `json:"to"`
	// Waves are the cumulative sizes of the waves as the policy gave them, for display.
	// +optional
	Waves []string `json:"waves,omitempty"`
}

// RolloutStatus is where the rollout is. Which CRs a wave moves is a function of this status
// and of each CR's namespace and name (see controllers/rollout.go), so that a restart of rudder
// picks the rollout up where it was, with no CR moved twice or skipped.
type RolloutStatus struct {
	// Phase is Progressing, Paused, Halted, RolledBack, Complete or Superseded.
	// +optional
	Phase string `json:"phase,omitempty"`
	// Wave is the current wave, from 1.
	// +optional
	Wave int32 `json:"wave,omitempty"`
	// Through is the last ordering key the waves so far admit (see controllers/rollout.go):
	// every CR whose key is not greater moves, with the CRs the canary's selector picks.
	// +optional
	Through string `json:"through,omitempty"`
	// WaveStarted is when the current wave started; ReadySince is since when every CR it
	// admitted has been Ready on the new chart (unset: not all are).
	// +optional
	WaveStarted *metav1.Time `json:"waveStarted,omitempty"`
	// +optional
	ReadySince *metav1.Time `json:"readySince,omitempty"`
	// Promoted is the rudder.dev/promote value handled last.
	// +optional
	Promoted string `json:"promoted,omitempty"`
	// Counts of the kind's CRs: all of them, those on the new chart (moved), those Ready on
	// it, those that failed on it (an upgrade failed, or not Ready within the health
	// timeout), and those held by rudder.dev/rollout-hold.
	// +optional
	Total int32 `json:"total"`
	// +optional
	Moved int32 `json:"moved"`
	// +optional
	Ready int32 `json:"ready"`
	// +optional
	Failed int32 `json:"failed"`
	// +optional
	Held int32 `json:"held"`
	// FailedCRs names (namespace/name) up to ten of the CRs that failed, with why.
	// +optional
	FailedCRs []string `json:"failedCRs,omitempty"`
	// Message says what the rollout waits for, or why it halted.
	// +optional
	Message string `json:"message,omitempty"`
}

// Rollout is one chart edit of a watch on its way to the watch's CRs, in health-gated waves.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Cluster
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Kind",type=string,JSONPath=`.spec.kind`
// +kubebuilder:printcolumn:name="From",type=string,JSONPath=`.spec.from`
// +kubebuilder:printcolumn:name="To",type=string,JSONPath=`.spec.to`
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Wave",type=integer,JSONPath=`.status.wave`
// +kubebuilder:printcolumn:name="Total",type=integer,JSONPath=`.status.total`
// +kubebuilder:printcolumn:name="Moved",type=integer,JSONPath=`.status.moved`
// +kubebuilder:printcolumn:name="Ready",type=integer,JSONPath=`.status.ready`
// +kubebuilder:printcolumn:name="Failed",type=integer,JSONPath=`.status.failed`
// +kubebuilder:printcolumn:name="Held",type=integer,JSONPath=`.status.held`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type Rollout struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   RolloutSpec   `json:"spec"`
	Status RolloutStatus `json:"status,omitempty"`
}

// RolloutList is a list of Rollouts.
//
// +kubebuilder:object:root=true
type RolloutList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Rollout `json:"items"`
}
