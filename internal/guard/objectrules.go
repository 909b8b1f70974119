package guard

import (
	"slices"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/rudder-operator/rudder/internal/release"
)

// The rules that read a release's objects together, manifest and hooks: what it hands out
// (identities, identity.go), grants (grants.go), asks of a node or the cluster's network
// (podsecurity.go, externalIPs below) and names of other objects (references.go). Each
// depends on what else the release makes: a binding may bind a Role the release makes, a
// Pod may mount a Secret it makes. They run after the render, before anything is applied,
// and on a stored revision before a rollback applies it.

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

func (c Confinement) releaseSet(objs []identityObject) *releaseSet {
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

// violations decides every rule of this file's family for the objects of one release.
func (c Confinement) violations(objs []identityObject, env objectRules) ([]Violation, error) {
	rs := c.releaseSet(objs)
	out := c.identityViolations(rs, env.needs)
	out = append(out, rs.grantViolations(env.needs)...)
	out = append(out, rs.podViolations(env.needs)...)
	out = append(out, rs.networkViolations(env.needs)...)
	vs, err := rs.referenceViolations(env)
	return append(out, vs...), err
}

// CheckObjectRules checks a stored revision (its manifest and hooks) against the rules of this
// family as the watch is now: what a rollback to it would apply. refs resolves what its
// objects name that it does not make (nil: nothing is resolved).
func (c Confinement) CheckObjectRules(rel *release.Release, refs ReferenceReader) error {
	objs, err := parseStreams(releaseStreams(rel))
	if err != nil {
		return err
	}
	if c.Release == "" {
		c.Release = rel.Name
	}
	vs, err := c.violations(objs, objectRules{refs: refs})
	if err != nil {
		return err
	}
	if len(vs) > 0 {
		return &ConfinementError{Violations: vs}
	}
	return nil
}

// networkViolations: a Service's externalIPs takes traffic to those addresses from the whole
// cluster (CVE-2020-8554), whatever namespace the Service is in; refused unless the watch
// allows it, as Kubernetes' DenyServiceExternalIPs admission plugin refuses it.
func (rs *releaseSet) networkViolations(needs *Needs) []Violation {
	var out []Violation
	for _, o := range rs.objs {
		if o.obj.GroupVersionKind().GroupKind() != (schema.GroupKind{Kind: "Service"}) {
			continue
		}
		ips, _, _ := unstructured.NestedFieldNoCopy(o.obj.Object, "spec", "externalIPs")
		if l, ok := ips.([]any); (ok && len(l) == 0) || ips == nil || rs.c.AllowExternalIPs {
			continue
		}
		if needs != nil {
			needs.ExternalIPs = append(needs.ExternalIPs, "Service "+o.obj.GetName())
			continue
		}
		out = append(out, o.violation("spec.externalIPs is set: traffic to those addresses from anywhere in the cluster would reach this Service, "+
			"and the watch's allowExternalIPs is not true"))
	}
	return out
}

// violation is a Violation of o for why.
func (o identityObject) violation(why string) Violation {
	return Violation{Source: o.src, Hook: o.hook, Kind: o.obj.GetKind(), Name: o.obj.GetName(), Namespace: o.obj.GetNamespace(), Why: why}
}

// Measuring is c widened so that the rules of this family refuse nothing: for a render that
// measures what a chart needs (scaffold, which notes it as Needs) instead of serving a CR.
func Measuring(c Confinement) Confinement {
	c.AllowServiceAccounts = []string{"*"}
	c.AllowSubjects = []rbacv1.Subject{{Kind: "*"}}
	c.AllowRoles = []string{"*"}
	c.AllowRules = []rbacv1.PolicyRule{{APIGroups: []string{"*"}, Resources: []string{"*"}, Verbs: []string{"*"}},
		{NonResourceURLs: []string{"*"}, Verbs: []string{"*"}}}
	c.AllowReads = []string{"*"}
	c.PodSecurity = PodSecurityPrivileged
	c.AllowExternalIPs = true
	return c
}
