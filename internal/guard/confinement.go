package guard

import (
	"fmt"
	"slices"
	"strings"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// What a watch confines its releases to (Confinement) and how a refusal is told (Violation):
// every check of the package builds on them.

// Source says where an object, or a request, of a release comes from.
type Source string

// The sources the confinement check names in its violations.
const (
	SourceManifest Source = "manifest"
	SourceHook     Source = "hook"
	SourceCRD      Source = "CRD (crds/)"
	// SourceRequest is a request Helm made for the release that reached no object of the
	// above first: a template's lookup, or anything else that went to the API server.
	SourceRequest Source = "request"
)

// Confinement says where a release may act: its own namespace, the watch's allowedNamespaces
// and the cluster-scoped kinds of allowClusterScoped. Every path by which Helm creates, reads,
// updates or deletes something for the release is held to it (see Client).
type Confinement struct {
	// Namespace is the owner's namespace, which is also the release's.
	Namespace string
	// AllowedNamespaces besides Namespace; "*" allows any.
	AllowedNamespaces []string
	// AllowClusterScoped kinds, as "Kind" (any group) or "Kind.group".
	AllowClusterScoped []string
	// AllowAggregationLabels are the aggregation labels (rbac.authorization.k8s.io/aggregate-to-*
	// and the like) a Role or ClusterRole of the release may carry or aggregate by.
	AllowAggregationLabels []string
	// AllowReads are what a render's lookups may read beyond what the release made: "Kind",
	// "Kind.group", "Kind/name" or "Kind.group/name" (see lookups.go).
	AllowReads []string
	// AllowServiceAccounts and AllowSubjects are the identities, beyond the release's own, it
	// may hand out (see identity.go).
	AllowServiceAccounts []string
	AllowSubjects        []rbacv1.Subject
	// AllowRoles are the Roles and ClusterRoles, besides those the release makes, its
	// bindings may bind: "ClusterRole/name" or "Role/name" (see grants.go).
	AllowRoles []string
	// AllowRules bound the rules of the Roles and ClusterRoles the release makes.
	AllowRules []rbacv1.PolicyRule
	// PodSecurity is the Pod Security Standards level every pod template of the release is
	// held to (see podsecurity.go); "" is DefaultPodSecurity.
	PodSecurity string
	// AllowExternalIPs lets the release's Services set externalIPs.
	AllowExternalIPs bool
	// Release is the release's name, which "<release>" stands for in the names of
	// AllowReads, AllowServiceAccounts and AllowRoles; "" where no release is named yet.
	Release string
	// ChartOwn, when set, reports whether an entry (OwnServiceAccount, OwnRole) is what the
	// chart's defaults, rendered as this release, hand out or bind after the release: what a
	// "<release>" entry of allowServiceAccounts or allowRoles stands for besides its name, since
	// a chart's fullname helper drops a suffix when the release's name holds the chart's (see
	// ChartOwnOf). Called at most when such an entry does not match by its name.
	ChartOwn func(entry string) bool
}

// ReleasePlaceholder stands for the release's name in the names of allowReads,
// allowServiceAccounts and allowRoles.
const ReleasePlaceholder = "<release>"

// allowsByRelease reports whether a "<release>" entry of list allows item, the entry own names
// for ChartOwn: by its name with the release's in place of "<release>", or, when item's name
// holds the release's, as what the chart's defaults name after the release. prefix is the part
// of an entry before the name ("ClusterRole/"), which must be item's too.
func (c Confinement) allowsByRelease(list []string, prefix, item, own string) bool {
	if c.Release == "" || !strings.HasPrefix(item, prefix) {
		return false
	}
	byChart := false
	for _, e := range list {
		if !strings.HasPrefix(e, prefix) || !strings.Contains(e, ReleasePlaceholder) {
			continue
		}
		if strings.ReplaceAll(e, ReleasePlaceholder, c.Release) == item {
			return true
		}
		byChart = true
	}
	return byChart && c.ChartOwn != nil && strings.Contains(strings.TrimPrefix(item, prefix), c.Release) && c.ChartOwn(own)
}

// AllowsNamespace reports whether namespaced objects of ns are within reach.
func (c Confinement) AllowsNamespace(ns string) bool {
	return ns == c.Namespace || slices.Contains(c.AllowedNamespaces, ns) || slices.Contains(c.AllowedNamespaces, "*")
}

// AllowsClusterScoped reports whether cluster-scoped objects of gk are within reach.
func (c Confinement) AllowsClusterScoped(gk schema.GroupKind) bool {
	return slices.ContainsFunc(c.AllowClusterScoped, func(k string) bool { return namesKind(k, gk) })
}

// namesKind reports whether a watch's entry for a kind, "Kind" (any group) or "Kind.group",
// names gk.
func namesKind(entry string, gk schema.GroupKind) bool {
	return entry == gk.Kind || entry == gk.Kind+"."+gk.Group
}

// Violation is one object or request outside a release's confinement.
type Violation struct {
	Source Source
	// Hook lists the hook events of a SourceHook object ("pre-install,post-delete").
	Hook string
	// Verb of a SourceRequest ("get", "list", "create", …).
	Verb      string
	Kind      string
	Name      string
	Namespace string // "" for cluster-scoped kinds and requests across all namespaces
	// Why says which rule it breaks.
	Why string
}

func (v Violation) String() string {
	var b strings.Builder
	b.WriteString(string(v.Source))
	if v.Hook != "" {
		b.WriteString(" (" + v.Hook + ")")
	}
	if v.Verb != "" {
		b.WriteString(" " + v.Verb)
	}
	b.WriteString(" " + v.Kind)
	if v.Name != "" {
		fmt.Fprintf(&b, " %q", v.Name)
	}
	if v.Namespace != "" {
		fmt.Fprintf(&b, " in namespace %q", v.Namespace)
	}
	b.WriteString(": " + v.Why)
	return b.String()
}

// ConfinementError is returned when a release would act outside its confinement. When an
// install, upgrade, rollback or uninstall returns it, none of the release's objects, hooks or
// CRDs has been created, changed or deleted (the check runs before the action's first write).
type ConfinementError struct{ Violations []Violation }

func (e *ConfinementError) Error() string {
	parts := make([]string, len(e.Violations))
	for i, v := range e.Violations {
		parts[i] = v.String()
	}
	return "outside the release's confinement: " + strings.Join(parts, "; ")
}

// UnknownKindError is returned when a chart renders a kind the API server does not serve.
type UnknownKindError struct{ Object string }

func (e *UnknownKindError) Error() string {
	return "rendered object of a kind the API server does not serve: " + e.Object
}

// checkObject decides one object of a release whose kind's scope is known.
func (c Confinement) checkObject(src Source, gvk schema.GroupVersionKind, name, ns string, namespaced bool) *Violation {
	if namespaced {
		if ns == "" {
			ns = c.Namespace
		}
		if c.AllowsNamespace(ns) {
			return nil
		}
		return &Violation{Source: src, Kind: gvk.Kind, Name: name, Namespace: ns,
			Why: c.outsideNamespaces()}
	}
	if c.AllowsClusterScoped(gvk.GroupKind()) {
		return nil
	}
	return &Violation{Source: src, Kind: gvk.Kind, Name: name,
		Why: fmt.Sprintf("cluster-scoped, and the watch's allowClusterScoped does not name %s", gvk.Kind)}
}

func (c Confinement) outsideNamespaces() string {
	if len(c.AllowedNamespaces) == 0 {
		return fmt.Sprintf("outside the CR's namespace %q (the watch allows no other namespace)", c.Namespace)
	}
	return fmt.Sprintf("outside the CR's namespace %q and the watch's allowedNamespaces %v", c.Namespace, c.AllowedNamespaces)
}
