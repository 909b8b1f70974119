package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	rstatus "github.com/rudder-operator/rudder/api/status"
)

// NginxOperatorSpec is the desired nginx Deployment.
type NginxOperatorSpec struct {
	// Port is the container port nginx listens on.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	// +kubebuilder:default=8080
	// +optional
	Port *int32 `json:"port,omitempty"`
	// Replicas is the number of nginx Pods.
	// +kubebuilder:validation:Minimum=0
	// +optional
	Replicas *int32 `json:"replicas,omitempty"`
	// ForceRedeploy: any change to this string rolls the Pods without other changes.
	// +optional
	ForceRedeploy string `json:"forceRedeploy,omitempty"`
}

// NginxOperatorStatus is rudder's common status.
type NginxOperatorStatus struct {
	rstatus.Common `json:",inline"`
}

// NginxOperator runs nginx as a Deployment named after it.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:categories=rudder
// +kubebuilder:printcolumn:name="Port",type=integer,JSONPath=`.spec.port`
// +kubebuilder:printcolumn:name="Replicas",type=integer,JSONPath=`.spec.replicas`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Revision",type=integer,JSONPath=`.status.release.revision`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type NginxOperator struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +optional
	Spec NginxOperatorSpec `json:"spec,omitempty"`
	// +optional
	Status NginxOperatorStatus `json:"status,omitempty"`
}

// NginxOperatorList is a list of NginxOperators.
//
// +kubebuilder:object:root=true
type NginxOperatorList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []NginxOperator `json:"items"`
}
