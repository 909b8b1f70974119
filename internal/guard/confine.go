package guard

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	"github.com/rudder-operator/rudder/internal/release"
)

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
	// AllowReads; "" where no release is named yet.
	Release string
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

// check decides one object whose kind's scope s knows; a kind neither the API server nor the
// chart's crds/ define is an UnknownKindError. Every per-object check goes through it.
func (c Confinement) check(s *Scoper, src Source, gvk schema.GroupVersionKind, name, ns string) (*Violation, error) {
	namespaced, err := s.Namespaced(gvk)
	if err != nil {
		what := fmt.Sprintf("%s %q (%s): %v", gvk.Kind, name, gvk.GroupVersion(), err)
		if src != SourceManifest {
			what = string(src) + " " + what
		}
		return nil, &UnknownKindError{Object: what}
	}
	return c.checkObject(src, gvk, name, ns, namespaced), nil
}

// CRDKind is the kind of everything in a chart's crds/ directory.
var CRDKind = schema.GroupVersionKind{Group: "apiextensions.k8s.io", Version: "v1", Kind: "CustomResourceDefinition"}

// Scoper tells a kind's scope: from the API server's mapping, else from the CRDs of the chart
// being installed (their kinds are not served until Helm created them).
type Scoper struct {
	mapper meta.RESTMapper
	crds   map[schema.GroupKind]bool // kind → namespaced
}

// CRDFile is one file of a chart's crds/ directory (of the chart or a subchart).
type CRDFile struct {
	// Name is the file's path in the chart, as errors name it.
	Name string
	Data []byte
}

// NewScoper is a Scoper of the API server's mapping and of the kinds crds define (the crds/
// of the chart being installed; nil: none).
func NewScoper(mapper meta.RESTMapper, crds []CRDFile) *Scoper {
	s := &Scoper{mapper: mapper, crds: map[schema.GroupKind]bool{}}
	for _, crd := range crds {
		_ = EachObject(crd.Data, func(o *unstructured.Unstructured) error {
			s.Learn(o.Object)
			return nil
		})
	}
	return s
}

// Learn keeps the scope of the kind a CustomResourceDefinition defines: the chart's crds/, and
// the CRDs a manifest renders in templates/, whose kinds the same manifest may use before the
// API server serves them.
// It reports whether o is a CustomResourceDefinition.
func (s *Scoper) Learn(o map[string]any) bool {
	d, ok := Defined(&unstructured.Unstructured{Object: o})
	if ok {
		s.crds[d.GroupKind] = d.Namespaced
	}
	return ok
}

// DefinedKind is what a CustomResourceDefinition defines.
type DefinedKind struct {
	schema.GroupKind
	Plural     string
	Namespaced bool
}

// Defined is the kind obj defines when it is a CustomResourceDefinition that names one.
func Defined(obj *unstructured.Unstructured) (DefinedKind, bool) {
	if obj.GetKind() != CRDKind.Kind || obj.GroupVersionKind().Group != CRDKind.Group {
		return DefinedKind{}, false
	}
	kind, _, _ := unstructured.NestedString(obj.Object, "spec", "names", "kind")
	plural, _, _ := unstructured.NestedString(obj.Object, "spec", "names", "plural")
	group, _, _ := unstructured.NestedString(obj.Object, "spec", "group")
	scope, _, _ := unstructured.NestedString(obj.Object, "spec", "scope")
	return DefinedKind{schema.GroupKind{Group: group, Kind: kind}, plural, scope != "Cluster"}, kind != ""
}

func (s *Scoper) Namespaced(gvk schema.GroupVersionKind) (bool, error) {
	if ns, ok := s.crds[gvk.GroupKind()]; ok {
		return ns, nil
	}
	m, err := s.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return false, err
	}
	return m.Scope.Name() == meta.RESTScopeNameNamespace, nil
}

// EachObject calls fn for every non-empty document of a YAML (or JSON) stream, decoded as the
// post-renderer decodes the manifest: keys are exact, as the API server reads them (a
// case-insensitive decoder would let a key the API server ignores, such as "nameſpace", stand
// in for the one it reads).
func EachObject(data []byte, fn func(*unstructured.Unstructured) error) error {
	docs := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	for {
		doc, err := docs.Read()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		raw, err := DecodeObject(doc)
		if err != nil {
			return err
		}
		if len(raw) == 0 {
			continue
		}
		if err := fn(&unstructured.Unstructured{Object: raw}); err != nil {
			return err
		}
	}
}

// checkStream checks every document of a manifest (or one hook's, or one CRD file's).
func (c Confinement) checkStream(s *Scoper, src Source, hook string, data []byte) ([]Violation, error) {
	var out []Violation
	err := EachObject(data, func(o *unstructured.Unstructured) error {
		gvk := o.GroupVersionKind()
		if gvk.Kind == "" {
			return fmt.Errorf("%s object %q without kind", src, o.GetName())
		}
		vs := c.rules(src, o)
		if len(vs) == 0 {
			v, err := c.check(s, src, gvk, o.GetName(), o.GetNamespace())
			if err != nil {
				return err
			}
			if v != nil {
				vs = append(vs, *v)
			}
		}
		for _, v := range vs {
			v.Hook = hook
			out = append(out, v)
		}
		return nil
	})
	return out, err
}

// CheckHooks checks every hook of a release, of every event.
func (c Confinement) checkHooks(s *Scoper, hooks []*release.Hook) ([]Violation, error) {
	var out []Violation
	for _, h := range hooks {
		vs, err := c.checkStream(s, SourceHook, hookEvents(h), []byte(h.Manifest))
		if err != nil {
			return nil, err
		}
		out = append(out, vs...)
	}
	return out, nil
}

// hookEvents are the events of a hook, as a violation names them ("post-delete,pre-install").
func hookEvents(h *release.Hook) string {
	events := slices.Clone(h.Events)
	sort.Strings(events)
	return strings.Join(events, ",")
}

// checkCRDs checks a chart's crds/ (of the chart and its subcharts), which Helm installs before
// it renders anything.
func (c Confinement) checkCRDs(s *Scoper, crds []CRDFile) ([]Violation, error) {
	var out []Violation
	for _, crd := range crds {
		vs, err := c.checkStream(s, SourceCRD, "", crd.Data)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", crd.Name, err)
		}
		out = append(out, vs...)
	}
	return out, nil
}

// CheckRelease checks a release as Helm is about to store or remove it: every hook and, with
// manifest, every object of the manifest. It is the check every action passes before its first
// write; crds, the chart's crds/, supply the scope of the kinds they define.
func (c Confinement) CheckRelease(mapper meta.RESTMapper, rel *release.Release, crds []CRDFile, manifest bool) error {
	s := NewScoper(mapper, crds)
	if manifest {
		_ = EachObject([]byte(rel.Manifest), func(o *unstructured.Unstructured) error {
			s.Learn(o.Object)
			return nil
		})
	}
	vs, err := c.checkHooks(s, rel.Hooks)
	if err != nil {
		return err
	}
	if manifest {
		mv, err := c.checkStream(s, SourceManifest, "", []byte(rel.Manifest))
		if err != nil {
			return err
		}
		vs = append(mv, vs...)
	}
	if len(vs) > 0 {
		return &ConfinementError{Violations: vs}
	}
	return nil
}

// CheckCRDs checks a chart's crds/ alone, which needs no rendering.
func (c Confinement) CheckCRDs(mapper meta.RESTMapper, crds []CRDFile) error {
	vs, err := c.checkCRDs(NewScoper(mapper, crds), crds)
	if err != nil {
		return err
	}
	if len(vs) > 0 {
		return &ConfinementError{Violations: vs}
	}
	return nil
}

// CheckObjects checks parsed objects of a release (its manifest, as drift re-apply restores
// it).
func (c Confinement) CheckObjects(mapper meta.RESTMapper, objs []*unstructured.Unstructured) error {
	s := NewScoper(mapper, nil)
	var vs []Violation
	for _, o := range objs {
		gvk := o.GroupVersionKind()
		v, err := c.check(s, SourceManifest, gvk, o.GetName(), o.GetNamespace())
		if err != nil {
			return err
		}
		if v != nil {
			vs = append(vs, *v)
		}
	}
	if len(vs) > 0 {
		return &ConfinementError{Violations: vs}
	}
	return nil
}
