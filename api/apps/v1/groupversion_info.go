// Package v1 holds the Application API (apps.sunstrider.cn/v1): a Deployment and a Service
// from charts/application, with a Go hook mirroring their status (controllers/application).
//
// +kubebuilder:object:generate=true
// +groupName=apps.sunstrider.cn
package v1

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/scheme"
)

var (
	// GroupVersion is the group version of these types.
	GroupVersion = schema.GroupVersion{Group: "apps.sunstrider.cn", Version: "v1"}
	// SchemeBuilder adds the types to a scheme.
	SchemeBuilder = &scheme.Builder{GroupVersion: GroupVersion}
	// AddToScheme adds the types of this group version to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)
