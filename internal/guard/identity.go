package guard

import (
	"fmt"
	"slices"
	"strings"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Identities: a release hands out no identity the watch did not name. Within its namespace a
// release could otherwise make a CR author someone else:
//
//   - a Secret of type kubernetes.io/service-account-token is filled in by the token
//     controller with a token of the ServiceAccount it names, which a lookup then copies out;
//   - a Pod (or a workload's pod template) runs as the ServiceAccount it names, with its
//     rights, and mounts its token;
//   - a RoleBinding or ClusterRoleBinding gives its role to the subjects it names.
//
// So a token Secret may name only a ServiceAccount the release makes; a Pod may run only as
// "default" or one the release makes; a binding may name only ServiceAccounts the release
// makes. allowServiceAccounts (ServiceAccounts of the CR's namespace) and allowSubjects (any
// subject) widen each. The release's own ServiceAccounts are those of its manifest and hooks,
// in the namespace they are rendered to.

// OwnServiceAccount is the entry of ChartOwnOf for a ServiceAccount of the release's namespace
// that the release hands out.
func OwnServiceAccount(name string) string { return "serviceaccount:" + name }

// identityCheck decides the identity rules for the objects of one release.
type identityCheck struct {
	c  Confinement
	rs *releaseSet
	// needs collects what the release would need allowed (see NeededBy).
	needs *Needs
}

// identityViolations decides the identity rules for the objects of one release, noting in
// needs, when set, what the release would need allowed.
func (rs *releaseSet) identityViolations(needs *Needs) []Violation {
	ic := identityCheck{c: rs.c, rs: rs, needs: needs}
	var out []Violation
	for _, o := range rs.objs {
		if why := ic.object(o.obj); why != "" {
			out = append(out, o.violation(why))
		}
	}
	return out
}

func (ic identityCheck) namespace(o *unstructured.Unstructured) string { return ic.rs.namespace(o) }

// object says which identity rule o breaks; "" when none.
func (ic identityCheck) object(o *unstructured.Unstructured) string {
	gvk := o.GroupVersionKind()
	switch {
	case gvk.Group == "" && gvk.Kind == "Secret":
		if t, _, _ := unstructured.NestedString(o.Object, "type"); t != serviceAccountTokenType {
			return ""
		}
		sa := o.GetAnnotations()[serviceAccountNameKey]
		if ic.serviceAccount(ic.namespace(o), sa) {
			return ""
		}
		ic.needServiceAccount(ic.namespace(o), sa)
		return fmt.Sprintf("a token Secret for the ServiceAccount %q, which this release does not make and the watch's allowServiceAccounts "+
			"does not name: it would hand out that ServiceAccount's token", sa)
	case gvk.Group == rbacv1.GroupName && (gvk.Kind == "RoleBinding" || gvk.Kind == "ClusterRoleBinding"):
		return ic.subjects(o)
	case slices.Contains(workloadGroups, gvk.Group) && podSpecPaths[gvk.Kind] != nil:
		spec, ok, _ := unstructured.NestedMap(o.Object, podSpecPaths[gvk.Kind]...)
		if !ok {
			return ""
		}
		for _, field := range []string{"serviceAccountName", "serviceAccount"} {
			sa, _ := spec[field].(string)
			if sa == "" || sa == "default" || ic.serviceAccount(ic.namespace(o), sa) {
				continue
			}
			ic.needServiceAccount(ic.namespace(o), sa)
			return fmt.Sprintf("runs Pods as the ServiceAccount %q (%s), which this release does not make and the watch's allowServiceAccounts "+
				"does not name", sa, field)
		}
	}
	return ""
}

// serviceAccount reports whether the release may hand out ServiceAccount name of namespace ns.
func (ic identityCheck) serviceAccount(ns, name string) bool {
	if name == "" {
		return false
	}
	if ic.rs.makes(schema.GroupKind{Kind: "ServiceAccount"}, ns, name) {
		return true
	}
	return ns == ic.c.Namespace && (slices.Contains(ic.c.AllowServiceAccounts, name) || slices.Contains(ic.c.AllowServiceAccounts, "*") ||
		ic.c.allowsByRelease(ic.c.AllowServiceAccounts, "", name, OwnServiceAccount(name)))
}

// needServiceAccount notes a ServiceAccount the release would need allowed: in allowServiceAccounts
// when it is of the release's namespace, else as a subject.
func (ic identityCheck) needServiceAccount(ns, name string) {
	switch {
	case ic.needs == nil:
	case ns == ic.c.Namespace:
		ic.needs.ServiceAccounts = append(ic.needs.ServiceAccounts, name)
	default:
		ic.needSubject(rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Name: name, Namespace: ns})
	}
}

func (ic identityCheck) needSubject(s rbacv1.Subject) {
	if ic.needs != nil && !slices.Contains(ic.needs.Subjects, s) {
		ic.needs.Subjects = append(ic.needs.Subjects, s)
	}
}

// subjects says which subject of a binding the release may not name; "" when it may name all.
func (ic identityCheck) subjects(o *unstructured.Unstructured) string {
	subjects, _, _ := unstructured.NestedSlice(o.Object, "subjects")
	for _, raw := range subjects {
		m, _ := raw.(map[string]any)
		kind, _ := m["kind"].(string)
		name, _ := m["name"].(string)
		ns, _ := m["namespace"].(string)
		if kind == rbacv1.ServiceAccountKind {
			if ns == "" && o.GetKind() == "RoleBinding" {
				ns = ic.namespace(o)
			}
			if ic.serviceAccount(ns, name) {
				continue
			}
		}
		if slices.ContainsFunc(ic.c.AllowSubjects, func(s rbacv1.Subject) bool {
			return s.Kind == "*" || s.Kind == kind && s.Name == name && (kind != rbacv1.ServiceAccountKind || s.Namespace == ns)
		}) {
			continue
		}
		if kind == rbacv1.ServiceAccountKind {
			ic.needServiceAccount(ns, name)
		} else {
			ic.needSubject(rbacv1.Subject{Kind: kind, APIGroup: rbacv1.GroupName, Name: name})
		}
		if ic.needs != nil {
			continue
		}
		who := kind + " " + name
		if ns != "" {
			who += " of namespace " + ns
		}
		return fmt.Sprintf("binds the %s, which is not a ServiceAccount this release makes and which the watch's allowSubjects and "+
			"allowServiceAccounts do not name", strings.TrimSpace(who))
	}
	return ""
}
