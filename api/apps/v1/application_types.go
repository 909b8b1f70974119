package v1

import (
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	rstatus "github.com/rudder-operator/rudder/api/status"
)

// ApplicationSpec embeds the specs of the Deployment and the Service the Application runs.
type ApplicationSpec struct {
	// Deployment is the spec of the Deployment named after the Application.
	Deployment appsv1.DeploymentSpec `json:"deployment"`
	// Service is the spec of the Service named after the Application.
	// +optional
	Service corev1.ServiceSpec `json:"service,omitempty"`
}

// ApplicationStatus mirrors the live objects' status plus rudder's common status.
type ApplicationStatus struct {
	// Workflow mirrors the live Deployment's status (an apps/v1 DeploymentStatus). Kept
	// schemaless: it is a verbatim copy, validated where it comes from.
	// +kubebuilder:validation:Schemaless
	// +kubebuilder:validation:Type=object
	// +kubebuilder:pruning:PreserveUnknownFields
	// +optional
	Workflow appsv1.DeploymentStatus `json:"workflow,omitempty"`
	// Network mirrors the live Service's status (a core/v1 ServiceStatus).
	// +kubebuilder:validation:Schemaless
	// +kubebuilder:validation:Type=object
	// +kubebuilder:pruning:PreserveUnknownFields
	// +optional
	Network corev1.ServiceStatus `json:"network,omitempty"`

	rstatus.Common `json:",inline"`
}

// Application runs a Deployment and a Service named after it.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:categories=rudder
// +kubebuilder:printcolumn:name="Replicas",type=integer,JSONPath=`.spec.deployment.replicas`
// +kubebuilder:printcolumn:name="Available",type=integer,JSONPath=`.status.workflow.availableReplicas`
// +kubebuilder:printcolumn:name="Type",type=string,JSONPath=`.spec.service.type`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type Application struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec ApplicationSpec `json:"spec"`
	// +optional
	Status ApplicationStatus `json:"status,omitempty"`
}

// ApplicationList is a list of Applications.
//
// +kubebuilder:object:root=true
type ApplicationList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Application `json:"items"`
}
