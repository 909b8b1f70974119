package helm

import (
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/scheme"
)

// clusterScoped are the built-in kinds that are not namespaced.
var clusterScoped = map[string]bool{
	"Namespace": true, "Node": true, "PersistentVolume": true, "ComponentStatus": true,
	"ClusterRole": true, "ClusterRoleBinding": true, "CustomResourceDefinition": true, "APIService": true,
	"MutatingWebhookConfiguration": true, "ValidatingWebhookConfiguration": true,
	"ValidatingAdmissionPolicy": true, "ValidatingAdmissionPolicyBinding": true,
	"MutatingAdmissionPolicy": true, "MutatingAdmissionPolicyBinding": true,
	"StorageClass": true, "VolumeAttachment": true, "CSIDriver": true, "CSINode": true, "VolumeAttributesClass": true,
	"PriorityClass": true, "RuntimeClass": true, "IngressClass": true, "CertificateSigningRequest": true,
	"ClusterTrustBundle": true, "FlowSchema": true, "PriorityLevelConfiguration": true, "DeviceClass": true,
	"ResourceSlice": true, "StorageVersion": true, "StorageVersionMigration": true, "IPAddress": true, "ServiceCIDR": true,
	"TokenReview": true, "SubjectAccessReview": true, "SelfSubjectAccessReview": true, "SelfSubjectRulesReview": true,
	"SelfSubjectReview": true,
}

// StaticMapper maps kinds without a cluster, for `rudder template`, `lint` and `scaffold`: every
// built-in kind of client-go's scheme with its scope, and any other kind as namespaced (a
// chart's own crds/ say otherwise; see scoper), its resource the guessed plural.
func StaticMapper() meta.RESTMapper {
	m := meta.NewDefaultRESTMapper(nil)
	for gvk := range scheme.Scheme.AllKnownTypes() {
		if gvk.Version == "__internal" || strings.HasSuffix(gvk.Kind, "List") || strings.HasSuffix(gvk.Kind, "Options") {
			continue
		}
		scope := meta.RESTScopeNamespace
		if clusterScoped[gvk.Kind] {
			scope = meta.RESTScopeRoot
		}
		m.Add(gvk, scope)
	}
	return guessingMapper{m}
}

// guessingMapper answers for kinds the scheme lacks as namespaced ones.
type guessingMapper struct{ *meta.DefaultRESTMapper }

func (g guessingMapper) RESTMapping(gk schema.GroupKind, versions ...string) (*meta.RESTMapping, error) {
	m, err := g.DefaultRESTMapper.RESTMapping(gk, versions...)
	if err == nil || !meta.IsNoMatchError(err) || len(versions) == 0 {
		return m, err
	}
	gvk := gk.WithVersion(versions[0])
	plural, _ := meta.UnsafeGuessKindToResource(gvk)
	return &meta.RESTMapping{Resource: plural, GroupVersionKind: gvk, Scope: meta.RESTScopeNamespace}, nil
}

// ClusterScopedKinds lists the built-in cluster-scoped kinds StaticMapper knows.
func ClusterScopedKinds() []string {
	out := make([]string, 0, len(clusterScoped))
	for k := range clusterScoped {
		out = append(out, k)
	}
	return out
}
