// Package v1alpha1 holds the NginxOperator API (operator.example.com/v1alpha1): a kind served
// by a chart alone (charts/nginx), with no Go hooks.
//
// +kubebuilder:object:generate=true
// +groupName=operator.example.com
package v1alpha1

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/scheme"
)

var (
	// GroupVersion is the group version of these types.
	GroupVersion = schema.GroupVersion{Group: "operator.example.com", Version: "v1alpha1"}
	// SchemeBuilder adds the types to a scheme.
	SchemeBuilder = &scheme.Builder{GroupVersion: GroupVersion}
	// AddToScheme adds the types of this group version to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)
