// Package v1alpha1 holds rudder's own API (rudder.dev/v1alpha1): the Rollout, one object per
// chart edit that a watch's rollout policy moves to its CRs in health-gated waves
// (controllers/rollout.go).
//
// +kubebuilder:object:generate=true
// +groupName=rudder.dev
package v1alpha1

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var (
	// GroupVersion is the group version of these types.
	GroupVersion = schema.GroupVersion{Group: "rudder.dev", Version: "v1alpha1"}
	// SchemeBuilder adds the types to a scheme.
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)
	// AddToScheme adds the types of this group version to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

func addKnownTypes(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion, &Rollout{}, &RolloutList{})
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
}

// Name is the name of the Rollout that moves the CRs of kind gvk (of the shard whose selector
// is shard, "" when unsharded) to chart digest to: kind.group-version, lowercase, then the
// digest's first 12 hex digits, then, when sharded, 10 hex digits of the selector's SHA-256.
func Name(gvk schema.GroupVersionKind, shard, to string) string {
	d := strings.TrimPrefix(to, "sha256:")
	d = d[:min(len(d), 12)]
	name := strings.ToLower(gvk.Kind+"."+gvk.Group+"-"+gvk.Version) + "-" + d
	if shard != "" {
		sum := sha256.Sum256([]byte(shard))
		name += "-" + hex.EncodeToString(sum[:5])
	}
	return name
}
