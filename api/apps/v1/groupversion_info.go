// Package v1 holds the Application API (apps.sunstrider.cn/v1): a Deployment and a Service
// from charts/application, with a Go hook mirroring their status (controllers/application).
//
// +kubebuilder:object:generate=true
// +groupName=apps.sunstrider.cn
package v1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var (
	// GroupVersion is the group version of these types.
	GroupVersion = schema.GroupVersion{Group: "apps.sunstrider.cn", Version: "v1"}
	// SchemeBuilder adds the types to a scheme.
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)
	// AddToScheme adds the types of this group version to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

func addKnownTypes(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion, &Application{}, &ApplicationList{})
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
}
