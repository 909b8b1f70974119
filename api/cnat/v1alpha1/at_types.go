package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	rstatus "github.com/rudder-operator/rudder/api/status"
)

// Phases of an At.
const (
	PhasePending = "PENDING"
	PhaseRunning = "RUNNING"
	PhaseDone    = "DONE"
)

// AtSpec says what to run and when.
type AtSpec struct {
	// Schedule is when to run, as an RFC 3339 UTC time such as 2020-11-16T10:12:00Z. A time in
	// the past runs at once.
	// +kubebuilder:validation:Pattern=`^\d{4}-(0[1-9]|1[0-2])-(0[1-9]|[12]\d|3[01])T([01]\d|2[0-3])(:[0-5]\d){2}(\.\d+)?Z$`
	Schedule string `json:"schedule"`
	// Command is a shell command line, run with `sh -c` in a Pod named after the At.
	// +kubebuilder:validation:MinLength=1
	Command string `json:"command"`
}

// AtStatus is the phase machine's record plus rudder's common status.
type AtStatus struct {
	// Phase is PENDING until the schedule, RUNNING while the Pod runs, DONE afterwards.
	// +kubebuilder:validation:Enum=PENDING;RUNNING;DONE
	// +optional
	Phase string `json:"phase,omitempty"`
	// StartTime is when the Pod was started.
	// +optional
	StartTime *metav1.Time `json:"startTime,omitempty"`
	// FinishTime is when the command finished.
	// +optional
	FinishTime *metav1.Time `json:"finishTime,omitempty"`
	// Succeeded says whether the command exited 0 (set when DONE).
	// +optional
	Succeeded *bool `json:"succeeded,omitempty"`
	// ExitCode of the command (set when DONE and known).
	// +optional
	ExitCode *int32 `json:"exitCode,omitempty"`
	// Reason is the container's termination reason (Completed, Error, OOMKilled, …).
	// +optional
	Reason string `json:"reason,omitempty"`

	rstatus.Common `json:",inline"`
}

// At runs a command once, at a given time.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:categories=rudder
// +kubebuilder:printcolumn:name="Schedule",type=string,JSONPath=`.spec.schedule`
// +kubebuilder:printcolumn:name="Command",type=string,JSONPath=`.spec.command`
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Exit",type=integer,JSONPath=`.status.exitCode`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type At struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec AtSpec `json:"spec"`
	// +optional
	Status AtStatus `json:"status,omitempty"`
}

// AtList is a list of Ats.
//
// +kubebuilder:object:root=true
type AtList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []At `json:"items"`
}
