package guard

import (
	"slices"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/rudder-operator/rudder/internal/release"
)

// A release's objects as the rules that read them together take them (objectrules.go's
// family): each object with the stream it comes from, what the release makes, its pod
// templates decoded once, and what the rules note for scaffold (Needs).

// Where workloads keep their pod spec, by kind.
var podSpecPaths = map[string][]string{
	"Pod":                   {"spec"},
	"PodTemplate":           {"template", "spec"},
	"ReplicationController": {"spec", "template", "spec"},
	"ReplicaSet":            {"spec", "template", "spec"},
	"Deployment":            {"spec", "template", "spec"},
	"StatefulSet":           {"spec", "template", "spec"},
	"DaemonSet":             {"spec", "template", "spec"},
	"Job":                   {"spec", "template", "spec"},
	"CronJob":               {"spec", "jobTemplate", "spec", "template", "spec"},
}

// workloadGroups are the API groups of the built-in kinds of podSpecPaths.
var workloadGroups = []string{"", "apps", "batch"}

// Needs are what a release's objects would need its watch to allow: what `rudder scaffold`
// writes for a chart's defaults.
type Needs struct {
	// ServiceAccounts and Subjects: allowServiceAccounts and allowSubjects.
	ServiceAccounts []string
	Subjects        []rbacv1.Subject
	// PodSecurity is the least Pod Security Standards level that admits every pod template,
	// and PodSecurityWhy what a stricter level refuses.
	PodSecurity    string
	PodSecurityWhy []string
	// ExternalIPs are the Services that set externalIPs.
	ExternalIPs []string
	// Reads are the allowReads entries of what its objects name and it does not make, each
	// with the object and field that names it.
	Reads map[string][]string
	// Roles are the roles its bindings bind and it does not make, "ClusterRole/name" or
	// "Role/name".
	Roles []string
}

// identityStream is one manifest of a release: its text and where it comes from.
type identityStream struct {
	src  Source
	hook string
	text string
}

type identityObject struct {
	identityStream
	obj *unstructured.Unstructured
}

// releaseStreams are the streams of rel: its manifest and each hook.
func releaseStreams(rel *release.Release) []identityStream {
	out := []identityStream{{src: SourceManifest, text: rel.Manifest}}
	for _, h := range rel.Hooks {
		out = append(out, identityStream{src: SourceHook, hook: hookEvents(h), text: h.Manifest})
	}
	return out
}

// parseStreams decodes the objects of streams, each with the stream it comes from.
func parseStreams(streams []identityStream) ([]identityObject, error) {
	var objs []identityObject
	for _, st := range streams {
		err := EachObject([]byte(st.text), func(o *unstructured.Unstructured) error {
			objs = append(objs, identityObject{st, o})
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	return objs, nil
}

// objectKey is one object of a release: its kind, namespace ("" for cluster-scoped kinds)
// and name.
type objectKey struct {
	schema.GroupKind
	Namespace, Name string
}

// releaseSet is the objects of one release, with what it makes.
type releaseSet struct {
	c    Confinement
	objs []identityObject
	made map[objectKey]bool
	// pods are the pod templates of objs, by index, each decoded once for the rules that
	// read it (podsecurity.go, references.go).
	pods []podDecoded
}

// podDecoded is one object's pod template, decoded: a nil spec for an object without one.
type podDecoded struct {
	md   *metav1.ObjectMeta
	spec *corev1.PodSpec
	err  error
}

// clusterScopedRefs are the cluster-scoped kinds the rules look up by name.
var clusterScopedRefs = []schema.GroupKind{{Group: rbacv1.GroupName, Kind: "ClusterRole"}}

// newReleaseSet is the objects of one release as c decides them, each pod template decoded once.
func newReleaseSet(c Confinement, objs []identityObject) *releaseSet {
	rs := &releaseSet{c: c, objs: objs, made: map[objectKey]bool{}, pods: make([]podDecoded, len(objs))}
	for i, o := range objs {
		rs.made[rs.key(o.obj)] = true
		rs.pods[i].md, rs.pods[i].spec, rs.pods[i].err = podTemplate(o.obj)
	}
	return rs
}

// key is o's objectKey, its namespace the release's where it names none.
func (rs *releaseSet) key(o *unstructured.Unstructured) objectKey {
	gk := o.GroupVersionKind().GroupKind()
	if slices.Contains(clusterScopedRefs, gk) {
		return objectKey{gk, "", o.GetName()}
	}
	return objectKey{gk, rs.namespace(o), o.GetName()}
}

func (rs *releaseSet) namespace(o *unstructured.Unstructured) string {
	if ns := o.GetNamespace(); ns != "" {
		return ns
	}
	return rs.c.Namespace
}

// makes reports whether the release makes the object of gk named name in ns ("" for a
// cluster-scoped kind).
func (rs *releaseSet) makes(gk schema.GroupKind, ns, name string) bool {
	return rs.made[objectKey{gk, ns, name}]
}

// objectRules are the environment of the rules beyond the objects: what the rules note in
// scaffold's place (needs, nil when checking), and how a reference the release does not
// resolve itself is resolved (nil: it is not).
type objectRules struct {
	needs *Needs
	refs  ReferenceReader
}

// violation is a Violation of o for why.
func (o identityObject) violation(why string) Violation {
	return Violation{Source: o.src, Hook: o.hook, Kind: o.obj.GetKind(), Name: o.obj.GetName(), Namespace: o.obj.GetNamespace(), Why: why}
}

// podTemplate is the pod metadata and spec of a Pod or of a built-in workload's pod template;
// a nil spec for any other object.
func podTemplate(o *unstructured.Unstructured) (*metav1.ObjectMeta, *corev1.PodSpec, error) {
	gvk := o.GroupVersionKind()
	path := podSpecPaths[gvk.Kind]
	if path == nil || !slices.Contains(workloadGroups, gvk.Group) {
		return nil, nil, nil
	}
	raw, found, _ := unstructured.NestedMap(o.Object, path...)
	if !found {
		return nil, nil, nil
	}
	spec := &corev1.PodSpec{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(raw, spec); err != nil {
		return nil, nil, err
	}
	md := &metav1.ObjectMeta{}
	mdPath := append(slices.Clone(path[:len(path)-1]), "metadata") // a Pod's own, or its template's
	if m, ok, _ := unstructured.NestedMap(o.Object, mdPath...); ok {
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(m, md); err != nil {
			return nil, nil, err
		}
	}
	return md, spec, nil
}

// ReferenceReader resolves a reference the release does not resolve itself: it reports whether
// the object of gk named name in ns exists and says it is meant for the release's CR, or was
// made by the release. An error is the read's, not a refusal.
type ReferenceReader func(gk schema.GroupKind, ns, name string) (bool, error)

const (
	serviceAccountTokenType = "kubernetes.io/service-account-token"
	serviceAccountNameKey   = "kubernetes.io/service-account.name"
)
