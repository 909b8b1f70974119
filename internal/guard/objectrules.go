package guard

import (
	"slices"
	"strings"

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
func (rs *releaseSet) violations(env objectRules) ([]Violation, error) {
	out := rs.identityViolations(env.needs)
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
	vs, err := newReleaseSet(c, objs).violations(objectRules{refs: refs})
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
		out = append(out, o.violation("spec.externalIPs is set: traffic to those addresses from anywhere in the cluster would reach this "+
			"Service, "+
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
	if _, err := newReleaseSet(Confinement{Namespace: ns, Release: rel.Name}, objs).violations(objectRules{needs: needs}); err != nil {
		return nil, err
	}
	slices.Sort(needs.ServiceAccounts)
	needs.ServiceAccounts = slices.Compact(needs.ServiceAccounts)
	return needs, nil
}

// ChartOwnOf is what rel, a chart's defaults rendered as the release they are for in namespace
// ns, names after the release (the name holds the release's name) and does not make: the
// objects it names in ns (OwnRead), the ServiceAccounts of ns it hands out (OwnServiceAccount)
// and the roles it binds (OwnRole). They are the chart's own: a chart's fullname helper keeps
// or drops a suffix by what the release is called (helm create's `contains $name
// .Release.Name`), so no name fixed beforehand names them for every release; the chart's
// defaults, rendered for this release, do. A reference among them is the release's to name; an
// identity or role, where the watch has a "<release>" entry for it (Confinement.ChartOwn).
func ChartOwnOf(ns string, rel *release.Release) (map[string]bool, error) {
	needs := &Needs{Reads: map[string][]string{}}
	objs, err := parseStreams(releaseStreams(rel))
	if err != nil {
		return nil, err
	}
	// No Release in the confinement: the entries keep the names as they are.
	if _, err := newReleaseSet(Confinement{Namespace: ns}, objs).violations(objectRules{needs: needs}); err != nil {
		return nil, err
	}
	out := map[string]bool{}
	after := func(name string) bool { return rel.Name != "" && strings.Contains(name, rel.Name) }
	for entry := range needs.Reads {
		if _, name, _ := strings.Cut(entry, "/"); after(name) {
			out["read:"+entry] = true
		}
	}
	for _, sa := range needs.ServiceAccounts {
		if after(sa) {
			out[OwnServiceAccount(sa)] = true
		}
	}
	for _, r := range needs.Roles {
		if kind, name, _ := strings.Cut(r, "/"); after(name) {
			out[OwnRole(kind, name)] = true
		}
	}
	return out, nil
}
