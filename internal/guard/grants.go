package guard

import (
	"fmt"
	"slices"
	"strings"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	rbacvalidation "k8s.io/component-helpers/auth/rbac/validation"
)

// Grants: a release grants nothing the watch did not name. The API server's own escalation
// check holds a role or binding to what the identity that creates it holds: rudder's, which
// may read Secrets for Helm's storage, or the watch's serviceAccountName. Neither is what the
// CR author holds, so on top of it:
//
//   - a RoleBinding or ClusterRoleBinding binds only a Role or ClusterRole the release makes,
//     or one the watch's allowRoles names ("ClusterRole/view", "Role/reader");
//   - the rules of every Role and ClusterRole the release makes are covered by the watch's
//     allowRules, as Kubernetes' escalation check decides coverage
//     (k8s.io/component-helpers/auth/rbac/validation.Covers).
//
// `rudder scaffold` writes both from what the chart's defaults render, so a chart's own RBAC
// keeps working and only what values add is refused. Which subjects a binding may name is
// the identity rules' (identity.go).

// OwnRole is the entry of ChartOwnOf for a role the release's bindings bind.
func OwnRole(kind, name string) string { return "role:" + kind + "/" + name }

// grantViolations decides the grant rules for the objects of one release.
func (rs *releaseSet) grantViolations(needs *Needs) []Violation {
	if needs != nil {
		// scaffold reads a chart's roles and bindings itself, with their sources; what they
		// bind and do not make is noted for ChartOwnOf.
		for _, o := range rs.objs {
			if k := o.obj.GetKind(); o.obj.GroupVersionKind().Group == rbacv1.GroupName && (k == "RoleBinding" || k == "ClusterRoleBinding") {
				if rs.roleRef(o) != "" {
					kind, _, _ := unstructured.NestedString(o.obj.Object, "roleRef", "kind")
					name, _, _ := unstructured.NestedString(o.obj.Object, "roleRef", "name")
					needs.Roles = append(needs.Roles, kind+"/"+name)
				}
			}
		}
		return nil
	}
	var out []Violation
	for _, o := range rs.objs {
		gvk := o.obj.GroupVersionKind()
		if gvk.Group != rbacv1.GroupName {
			continue
		}
		var why string
		switch gvk.Kind {
		case "RoleBinding", "ClusterRoleBinding":
			why = rs.roleRef(o)
		case "Role", "ClusterRole":
			why = rs.rules(o)
		}
		if why != "" {
			out = append(out, o.violation(why))
		}
	}
	return out
}

// roleRef says why a binding may not bind its role; "" when it may.
func (rs *releaseSet) roleRef(o identityObject) string {
	ref, _ := o.obj.Object["roleRef"].(map[string]any)
	kind, _ := ref["kind"].(string)
	name, _ := ref["name"].(string)
	group, _ := ref["apiGroup"].(string)
	switch {
	case group != rbacv1.GroupName:
		return fmt.Sprintf("its roleRef's apiGroup is %q, not %s", group, rbacv1.GroupName)
	case kind == "ClusterRole" && rs.makes(schema.GroupKind{Group: rbacv1.GroupName, Kind: kind}, "", name):
		return ""
	case kind == "Role" && o.obj.GetKind() == "RoleBinding" && rs.makes(schema.GroupKind{Group: rbacv1.GroupName, Kind: kind},
		rs.namespace(o.obj), name):
		return ""
	case (kind == "Role" || kind == "ClusterRole") && rs.c.AllowsRole(kind, name):
		return ""
	}
	return fmt.Sprintf("binds the %s %q, which this release does not make and the watch's allowRoles does not name: it would grant what that "+
		"role holds", kind, name)
}

// AllowsRole reports whether the watch's allowRoles names the Role or ClusterRole name ("*":
// any).
func (c Confinement) AllowsRole(kind, name string) bool {
	return slices.Contains(c.AllowRoles, kind+"/"+name) || slices.Contains(c.AllowRoles, "*") ||
		c.allowsByRelease(c.AllowRoles, kind+"/", kind+"/"+name, OwnRole(kind, name))
}

// rules says which rules of a role the watch's allowRules do not cover; "" when it covers all.
func (rs *releaseSet) rules(o identityObject) string {
	var role rbacv1.ClusterRole // a Role's fields are a subset
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.obj.Object, &role); err != nil {
		return "its rules do not decode: " + err.Error()
	}
	covered, missing := rbacvalidation.Covers(rs.c.AllowRules, role.Rules)
	if covered {
		return ""
	}
	var parts []string
	for i, r := range missing {
		if i == maxListed {
			parts = append(parts, fmt.Sprintf("and %d more", len(missing)-i))
			break
		}
		parts = append(parts, describeRule(r))
	}
	return fmt.Sprintf("grants %s, which the watch's allowRules do not cover", strings.Join(parts, "; "))
}

// maxListed bounds what a violation lists of one object.
const maxListed = 5

// describeRule is a rule as a message names it: verbs on resources of groups.
func describeRule(r rbacv1.PolicyRule) string {
	var b strings.Builder
	b.WriteString(strings.Join(r.Verbs, ","))
	if len(r.NonResourceURLs) > 0 {
		b.WriteString(" " + strings.Join(r.NonResourceURLs, ","))
		return b.String()
	}
	b.WriteString(" " + strings.Join(r.Resources, ","))
	groups := make([]string, len(r.APIGroups))
	for i, g := range r.APIGroups {
		groups[i] = g
		if g == "" {
			groups[i] = `""`
		}
	}
	fmt.Fprintf(&b, " (apiGroups %s)", strings.Join(groups, ","))
	if len(r.ResourceNames) > 0 {
		b.WriteString(" named " + strings.Join(r.ResourceNames, ","))
	}
	return b.String()
}
