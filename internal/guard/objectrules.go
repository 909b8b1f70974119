package guard

import (
	"slices"

	rbacv1 "k8s.io/api/rbac/v1"
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

// NeededBy is what rel, a release named release in namespace ns, needs its watch to allow
// beyond the kind's role and its confinement.
func NeededBy(ns string, rel *release.Release) (*Needs, error) {
	needs := &Needs{Reads: map[string][]string{}}
	objs, err := parseStreams(releaseStreams(rel))
	if err != nil {
		return nil, err
	}
	if _, err := (Confinement{Namespace: ns, Release: rel.Name}).violations(objs, objectRules{needs: needs}); err != nil {
		return nil, err
	}
	slices.Sort(needs.ServiceAccounts)
	needs.ServiceAccounts = slices.Compact(needs.ServiceAccounts)
	return needs, nil
}

// checkIdentities checks the objects of the streams of one release (its manifest and every
// hook) against the identity rules alone.
func (c Confinement) checkIdentities(streams []identityStream) ([]Violation, error) {
	objs, err := parseStreams(streams)
	if err != nil {
		return nil, err
	}
	return c.identityViolations(c.releaseSet(objs), nil), nil
}
