// Package v1alpha1 holds the At API (cnat.ishankhare.dev/v1alpha1): a cloud-native `at`, a chart
// (charts/at) gated by Go hooks that run a phase machine (controllers/at).
//
// +kubebuilder:object:generate=true
// +groupName=cnat.ishankhare.dev
package v1alpha1

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/scheme"
)

var (
	// GroupVersion is the group version of these types.
	GroupVersion = schema.GroupVersion{Group: "cnat.ishankhare.dev", Version: "v1alpha1"}
	// SchemeBuilder adds the types to a scheme.
	SchemeBuilder = &scheme.Builder{GroupVersion: GroupVersion}
	// AddToScheme adds the types of this group version to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)
