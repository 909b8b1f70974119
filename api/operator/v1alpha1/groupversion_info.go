// Package v1alpha1 holds the NginxOperator API (operator.example.com/v1alpha1): a kind served
// by a chart alone (charts/nginx), with no Go hooks.
//
// +kubebuilder:object:generate=true
// +groupName=operator.example.com
package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var (
	// GroupVersion is the group version of these types.
	GroupVersion = schema.GroupVersion{Group: "operator.example.com", Version: "v1alpha1"}
	// SchemeBuilder adds the types to a scheme.
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)
	// AddToScheme adds the types of this group version to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

func addKnownTypes(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion, &NginxOperator{}, &NginxOperatorList{})
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
}
