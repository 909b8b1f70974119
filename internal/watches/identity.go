package watches

import (
	"fmt"
	"slices"
	"strings"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/rudder-operator/rudder/internal/guard"
)

// What a release may read and which identities it may hand out, beyond its own (the platform
// team's to widen, per watch; guard.Confinement holds every release to them):
//
//   - allowReads: what a render's lookups may read that the release did not make: "Kind",
//     "Kind.group", "Kind/name" or "Kind.group/name" (for example "ConfigMap/shared-ca", or
//     "CustomResourceDefinition" for a chart that checks for another's CRDs).
//   - allowServiceAccounts: ServiceAccounts of the CR's namespace, besides "default" and those
//     the release makes, that its Pods (and the pod templates of workloads) may run as, that
//     a token Secret may be made for, and that its bindings may name — for example one the
//     platform team provides; "*" allows any ServiceAccount of the namespace. "<release>" in a
//     name (allowRoles' too) stands for the release's name, and for what the chart's defaults
//     name after the release (guard.ChartOwnOf): a fullname helper drops a suffix when the
//     release's name holds the chart's.
//   - allowSubjects: other subjects (users, groups, ServiceAccounts of other namespaces) its
//     RoleBindings and ClusterRoleBindings may name.
//   - allowRoles: the existing roles its bindings may bind ("ClusterRole/view", "Role/reader"),
//     besides those it makes; allowRules: what the rules of the roles it makes may grant.
//   - podSecurity: the Pod Security Standards level its pod templates are held to;
//     allowExternalIPs: its Services may set externalIPs.

func (ck checking) checkIdentities() error {
	w := ck.w
	for i, r := range w.AllowReads {
		kind, name, named := strings.Cut(r, "/")
		if kind == "" || (named && name == "") || strings.ContainsAny(kind, " *") {
			return fmt.Errorf("allowReads[%d]: %q is not Kind, Kind.group, Kind/name or Kind.group/name", i, r)
		}
	}
	for i, sa := range w.AllowServiceAccounts {
		if errs := validation.IsDNS1123Subdomain(strings.ReplaceAll(sa, guard.ReleasePlaceholder, "r")); len(errs) > 0 && sa != "*" {
			return fmt.Errorf("allowServiceAccounts[%d]: %q: %s", i, sa, strings.Join(errs, "; "))
		}
	}
	for i, r := range w.AllowRoles {
		kind, name, ok := strings.Cut(r, "/")
		if !ok || (kind != "Role" && kind != "ClusterRole") || name == "" {
			return fmt.Errorf("allowRoles[%d]: %q is not ClusterRole/name or Role/name", i, r)
		}
	}
	for i, r := range w.AllowRules {
		if len(r.Verbs) == 0 {
			return fmt.Errorf("allowRules[%d].verbs: empty", i)
		}
		if len(r.Resources) == 0 && len(r.NonResourceURLs) == 0 {
			return fmt.Errorf("allowRules[%d]: names neither resources nor nonResourceURLs", i)
		}
	}
	if w.PodSecurity != "" && !slices.Contains(guard.PodSecurityLevels, w.PodSecurity) {
		return fmt.Errorf("podSecurity: %q is not one of %s", w.PodSecurity, strings.Join(guard.PodSecurityLevels, ", "))
	}
	for i, s := range w.AllowSubjects {
		switch {
		case s.Kind != rbacv1.UserKind && s.Kind != rbacv1.GroupKind && s.Kind != rbacv1.ServiceAccountKind:
			return fmt.Errorf("allowSubjects[%d].kind: %q is not User, Group or ServiceAccount", i, s.Kind)
		case s.Name == "":
			return fmt.Errorf("allowSubjects[%d].name: empty", i)
		case s.Kind == rbacv1.ServiceAccountKind && s.Namespace == "":
			return fmt.Errorf("allowSubjects[%d].namespace: a ServiceAccount subject names its namespace (those of the CR's namespace go in "+
				"allowServiceAccounts)", i)
		}
	}
	return nil
}
