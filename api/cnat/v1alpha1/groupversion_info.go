// Package v1alpha1 holds the At API (cnat.ishankhare.dev/v1alpha1): a cloud-native `at`, a chart
// (charts/at) gated by Go hooks that run a phase machine (controllers/at).
//
// +kubebuilder:object:generate=true
// +groupName=cnat.ishankhare.dev
package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var (
	// GroupVersion is the group version of these types.
	GroupVersion = schema.GroupVersion{Group: "cnat.ishankhare.dev", Version: "v1alpha1"}
	// SchemeBuilder adds the types to a scheme.
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)
	// AddToScheme adds the types of this group version to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

func addKnownTypes(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion, &At{}, &AtList{})
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
}
