package helm

import (
	"strings"
	"sync"

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
// built-in kind of client-go's scheme with its scope, and any other kind as guessingMapper
// guesses it (a chart's own CRDs say otherwise; see scoper).
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

// guessingMapper answers for kinds the scheme lacks with the guessed plural, as namespaced
// ones unless the kind is a built-in cluster-scoped one served by another API server
// (APIService) or, by the convention CRDs follow, its name starts with "Cluster"
// (ClusterIssuer, ClusterSecretStore).
type guessingMapper struct{ *meta.DefaultRESTMapper }

func (g guessingMapper) RESTMapping(gk schema.GroupKind, versions ...string) (*meta.RESTMapping, error) {
	m, err := g.DefaultRESTMapper.RESTMapping(gk, versions...)
	if err == nil || !meta.IsNoMatchError(err) || len(versions) == 0 {
		return m, err
	}
	gvk := gk.WithVersion(versions[0])
	plural, _ := meta.UnsafeGuessKindToResource(gvk)
	scope := meta.RESTScopeNamespace
	if clusterScoped[gk.Kind] || strings.HasPrefix(gk.Kind, "Cluster") {
		scope = meta.RESTScopeRoot
	}
	return &meta.RESTMapping{Resource: plural, GroupVersionKind: gvk, Scope: scope}, nil
}

// ClusterScopedKinds lists the built-in cluster-scoped kinds StaticMapper knows.
func ClusterScopedKinds() []string {
	out := make([]string, 0, len(clusterScoped))
	for k := range clusterScoped {
		out = append(out, k)
	}
	return out
}

// MemoMapper answers RESTMapping for one kind at one version from memory after its first
// answer. controller-runtime's dynamic mapper keeps discovery, not answers: it builds each
// answer anew, through every version of the group, and a namespace-scoped cache asks on every
// read (a tenth of what rudder allocated while installing 2000 releases).
// A kind's resource and scope cannot change while its CRD exists (both are immutable); only
// found kinds are kept, so a kind that is not there yet is looked up again every time.
func MemoMapper(m meta.RESTMapper) meta.RESTMapper {
	return &memoMapper{RESTMapper: m, mappings: map[schema.GroupVersionKind]meta.RESTMapping{}}
}

type memoMapper struct {
	meta.RESTMapper
	mu       sync.RWMutex
	mappings map[schema.GroupVersionKind]meta.RESTMapping
}

func (m *memoMapper) RESTMapping(gk schema.GroupKind, versions ...string) (*meta.RESTMapping, error) {
	if len(versions) != 1 || versions[0] == "" {
		return m.RESTMapper.RESTMapping(gk, versions...)
	}
	gvk := gk.WithVersion(versions[0])
	m.mu.RLock()
	rm, ok := m.mappings[gvk]
	m.mu.RUnlock()
	if ok {
		return &rm, nil // a copy: callers may not share it
	}
	found, err := m.RESTMapper.RESTMapping(gk, versions...)
	if err != nil {
		return nil, err
	}
	m.mu.Lock()
	m.mappings[gvk] = *found
	m.mu.Unlock()
	return found, nil
}
