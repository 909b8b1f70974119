package watches

import (
	"fmt"
	"slices"
	"strings"
	"text/template"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"

	rstatus "github.com/rudder-operator/rudder/api/status"
	"github.com/rudder-operator/rudder/internal/health"
)

// AnnotationDependsOn, on a CR, names the CRs it depends on, comma-separated, each as
// Kind/name (in the CR's namespace) or Kind/namespace/name; Kind is a kind of the watch's
// dependsOn.kinds, as Kind or Kind.group. It adds to the watch's dependsOn.defaults.
const AnnotationDependsOn = "rudder.dev/depends-on"

// AnnotationDeleteAfterDependents, on a CR others depend on, makes its deletion wait until
// they are gone: "true" for at most DefaultDependentsWait, or a duration (at most
// MaxDependentsWait). Then it is uninstalled whatever remains, saying so.
const AnnotationDeleteAfterDependents = "rudder.dev/delete-after-dependents"

// DefaultDependentsWait and MaxDependentsWait bound how long a deletion waits for dependents.
const (
	DefaultDependentsWait = 10 * time.Minute
	MaxDependentsWait     = time.Hour
)

// DependentsWait is how long obj's deletion waits for the CRs that depend on it (0: it does
// not), and an error for a value that is neither "true" nor a duration within the bound.
func DependentsWait(obj metav1.Object) (time.Duration, error) {
	v, ok := obj.GetAnnotations()[AnnotationDeleteAfterDependents]
	switch v = strings.TrimSpace(v); {
	case !ok || v == "" || v == "false":
		return 0, nil
	case v == "true":
		return DefaultDependentsWait, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 || d > MaxDependentsWait {
		return 0, fmt.Errorf("annotation %s: %q is neither \"true\" nor a duration up to %s", AnnotationDeleteAfterDependents, v,
			MaxDependentsWait)
	}
	return d, nil
}

// DependsOn is a watch's dependsOn: the CRs of other watched kinds (or its own) that its CRs
// may wait for, as Flux's dependsOn orders HelmReleases. A CR names them in its
// AnnotationDependsOn, and the watch may name some for every CR (Defaults). A CR is installed
// or upgraded only once each is ready; until then it is Ready=False, DependencyNotReady,
// and a change of a dependency takes it again.
type DependsOn struct {
	// Kinds are the kinds a CR may depend on: kinds of this watches file, each named Kind
	// (when one watched kind has that name) or Kind.group. A kind not listed is refused.
	Kinds []DependencyKind `json:"kinds"`
	// AllowNamespaces are the namespaces besides the CR's own a dependency may be in ("*": any).
	// By default a CR depends only on CRs of its own namespace.
	AllowNamespaces []string `json:"allowNamespaces,omitempty"`
	// Defaults are dependencies of every CR, written as in the annotation; each is a template
	// over the CR, like overrideValues (e.g. "Database/{{ .metadata.name }}-db").
	Defaults []string `json:"defaults,omitempty"`
}

// DependencyKind is a kind CRs may depend on, and when one of its CRs is ready.
type DependencyKind struct {
	// Kind is Kind or Kind.group.
	Kind string `json:"kind"`
	// ReadyExpr, when set, is a CEL expression over the dependency (metadata, spec, status, as
	// in healthChecks) that is true once it is ready, in place of its Ready condition.
	ReadyExpr string `json:"readyExpr,omitempty"`
}

// dependencies is DependsOn resolved against the watches file.
type dependencies struct {
	kinds    []schema.GroupVersionKind
	names    map[string]schema.GroupVersionKind // by Kind (when unique) and by Kind.group
	anyNS    bool
	ns       map[string]bool
	defaults []*template.Template
	ready    *health.Checker
}

// Dependency is a CR another depends on.
type Dependency struct {
	GVK             schema.GroupVersionKind
	Namespace, Name string
}

// DependencyOn is obj, a CR of kind gvk, as a dependency.
func DependencyOn(gvk schema.GroupVersionKind, obj metav1.Object) Dependency {
	return Dependency{GVK: gvk, Namespace: obj.GetNamespace(), Name: obj.GetName()}
}

// Ref names d as the annotation does, with its namespace: Kind/namespace/name.
func (d Dependency) String() string { return d.GVK.Kind + "/" + d.Namespace + "/" + d.Name }

// Key is d's namespace and name.
func (d Dependency) Key() (namespace, name string) { return d.Namespace, d.Name }

// IndexValue is how an index of dependents names d: its group, kind, namespace and name.
func (d Dependency) IndexValue() string {
	return d.GVK.GroupKind().String() + "/" + d.Namespace + "/" + d.Name
}

// resolveDependsOn resolves each watch's dependsOn against ws, the whole file: a dependency's
// kind must be watched, so that rudder has its CRs in its cache and knows its readiness.
func resolveDependsOn(ws []*Watch) error {
	byKind, byGroupKind := map[string][]schema.GroupVersionKind{}, map[string]schema.GroupVersionKind{}
	for _, w := range ws {
		byKind[w.Kind] = append(byKind[w.Kind], w.gvk)
		byGroupKind[w.gvk.GroupKind().String()] = w.gvk
	}
	for i, w := range ws {
		if err := w.resolveDependsOn(byKind, byGroupKind); err != nil {
			return fmt.Errorf("entry %d (%s): %w", i, w, err)
		}
	}
	return nil
}

func (w *Watch) resolveDependsOn(byKind map[string][]schema.GroupVersionKind, byGroupKind map[string]schema.GroupVersionKind) error {
	d := w.DependsOn
	if d == nil {
		return nil
	}
	if len(d.Kinds) == 0 {
		return fmt.Errorf("dependsOn.kinds: required: the kinds this watch's CRs may depend on")
	}
	deps := &dependencies{names: map[string]schema.GroupVersionKind{}, ns: map[string]bool{}}
	var checks []health.Check
	for i, k := range d.Kinds {
		field := fmt.Sprintf("dependsOn.kinds[%d].kind", i)
		gvk, ok := byGroupKind[k.Kind]
		if !ok {
			switch found := byKind[k.Kind]; len(found) {
			case 0:
				return fmt.Errorf("%s: %q is not a kind of this watches file (Kind or Kind.group)", field, k.Kind)
			case 1:
				gvk = found[0]
			default:
				return fmt.Errorf("%s: %q names %d watched kinds: name it as Kind.group", field, k.Kind, len(found))
			}
		}
		if slices.Contains(deps.kinds, gvk) {
			return fmt.Errorf("%s: %s is listed twice", field, gvk.GroupKind())
		}
		deps.kinds = append(deps.kinds, gvk)
		deps.names[gvk.GroupKind().String()] = gvk
		if k.ReadyExpr != "" {
			checks = append(checks, health.Check{APIVersion: gvk.GroupVersion().String(), Kind: gvk.Kind, Current: k.ReadyExpr})
		}
	}
	// A bare Kind names a listed kind when no other listed kind has that name.
	for _, gvk := range deps.kinds {
		if n := countKind(deps.kinds, gvk.Kind); n == 1 {
			deps.names[gvk.Kind] = gvk
		}
	}
	ready, err := health.Compile("dependsOn.kinds", checks)
	if err != nil {
		return fmt.Errorf("dependsOn.kinds: readyExpr: %w", err)
	}
	deps.ready = ready
	for _, ns := range d.AllowNamespaces {
		if ns == "*" {
			deps.anyNS = true
			continue
		}
		if errs := validation.IsDNS1123Label(ns); len(errs) > 0 {
			return fmt.Errorf("dependsOn.allowNamespaces: %q: %s", ns, strings.Join(errs, "; "))
		}
		deps.ns[ns] = true
	}
	for i, text := range d.Defaults {
		t, err := newTemplate(fmt.Sprintf("dependsOn.defaults[%d]", i), text)
		if err != nil {
			return fmt.Errorf("dependsOn.defaults[%d]: %w", i, err)
		}
		deps.defaults = append(deps.defaults, t)
	}
	w.deps = deps
	return nil
}

func countKind(gvks []schema.GroupVersionKind, kind string) int {
	n := 0
	for _, g := range gvks {
		if g.Kind == kind {
			n++
		}
	}
	return n
}

// Ordering is what a watch's dependsOn says of its CRs: what each depends on, and when a
// dependency is ready (see DependsOn).
type Ordering struct{ w *Watch }

// Ordering is the watch's dependsOn, as its passes ask it.
func (w *Watch) Ordering() Ordering { return Ordering{w} }

// MayDependIn reports whether the watch's CRs may depend on CRs of namespace ns besides their
// own (dependsOn.allowNamespaces).
func (o Ordering) MayDependIn(ns string) bool {
	w := o.w
	return w.deps != nil && (w.deps.anyNS || w.deps.ns[ns])
}

// Kinds are the kinds the watch's CRs may depend on (nil: none).
func (o Ordering) Kinds() []schema.GroupVersionKind {
	w := o.w
	if w.deps == nil {
		return nil
	}
	return w.deps.kinds
}

// Has reports whether obj, a CR of the watch, may name dependencies: obj has the
// annotation, or the watch has defaults. It reads nothing else, for every pass asks it.
func (o Ordering) Has(obj metav1.Object) bool {
	w := o.w
	_, ok := obj.GetAnnotations()[AnnotationDependsOn]
	return ok || (w.deps != nil && len(w.deps.defaults) > 0)
}

// Of is what obj, a CR of the watch, depends on: the watch's defaults, then its
// annotation's entries, each once. An entry of another kind than dependsOn.kinds, or of a
// namespace the watch does not allow, is an error naming it.
func (o Ordering) Of(obj *unstructured.Unstructured) ([]Dependency, error) {
	w := o.w
	if !o.Has(obj) {
		return nil, nil
	}
	if w.deps == nil {
		return nil, fmt.Errorf("annotation %s: the watch of %s has no dependsOn: its CRs may depend on nothing", AnnotationDependsOn, w)
	}
	var out []Dependency
	add := func(field, ref string) error {
		d, err := w.deps.parse(ref, obj.GetNamespace())
		if err != nil {
			return fmt.Errorf("%s: %q: %w", field, ref, err)
		}
		if d == DependencyOn(obj.GroupVersionKind(), obj) {
			return fmt.Errorf("%s: %q: a CR cannot depend on itself", field, ref)
		}
		if !slices.Contains(out, d) {
			out = append(out, d)
		}
		return nil
	}
	for i, t := range w.deps.defaults {
		var b strings.Builder
		if err := t.Execute(&b, obj.Object); err != nil {
			return nil, fmt.Errorf("dependsOn.defaults[%d]: %w", i, err)
		}
		for ref := range strings.SplitSeq(b.String(), ",") {
			if ref = strings.TrimSpace(ref); ref != "" && ref != "<no value>" {
				if err := add(fmt.Sprintf("the watch's dependsOn.defaults[%d]", i), ref); err != nil {
					return nil, err
				}
			}
		}
	}
	if v, ok := obj.GetAnnotations()[AnnotationDependsOn]; ok {
		for i, ref := range strings.Split(v, ",") {
			if ref = strings.TrimSpace(ref); ref == "" {
				continue
			}
			if err := add(fmt.Sprintf("annotation %s, entry %d", AnnotationDependsOn, i+1), ref); err != nil {
				return nil, err
			}
		}
	}
	return out, nil
}

// parse reads one entry, Kind/name or Kind/namespace/name, of a CR of namespace ns.
func (d *dependencies) parse(ref, ns string) (Dependency, error) {
	parts := strings.Split(ref, "/")
	var kind, depNS, name string
	switch len(parts) {
	case 2:
		kind, depNS, name = parts[0], ns, parts[1]
	case 3:
		kind, depNS, name = parts[0], parts[1], parts[2]
	default:
		return Dependency{}, fmt.Errorf("not Kind/name or Kind/namespace/name")
	}
	gvk, ok := d.names[kind]
	if !ok {
		return Dependency{}, fmt.Errorf("%s is not a kind this kind's CRs may depend on (the watch's dependsOn.kinds: %s)", kind,
			d.kindList())
	}
	if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 {
		return Dependency{}, fmt.Errorf("name %q: %s", name, strings.Join(errs, "; "))
	}
	if errs := validation.IsDNS1123Label(depNS); len(errs) > 0 {
		return Dependency{}, fmt.Errorf("namespace %q: %s", depNS, strings.Join(errs, "; "))
	}
	if depNS != ns && !d.anyNS && !d.ns[depNS] {
		return Dependency{}, fmt.Errorf("namespace %s: a CR depends only on CRs of its own namespace unless the watch's "+
			"dependsOn.allowNamespaces names the other", depNS)
	}
	return Dependency{GVK: gvk, Namespace: depNS, Name: name}, nil
}

func (d *dependencies) kindList() string {
	names := make([]string, len(d.kinds))
	for i, g := range d.kinds {
		names[i] = g.GroupKind().String()
	}
	return strings.Join(names, ", ")
}

// Ready is whether dep, a CR of a kind the watch's CRs may depend on, is ready, and
// if not why: with the kind's readyExpr, once it is true on the generation the dependency's
// status observed; otherwise once its Ready condition is True for its current generation.
func (o Ordering) Ready(dep *unstructured.Unstructured) (bool, string) {
	w := o.w
	gvk := dep.GroupVersionKind()
	if w.deps != nil && w.deps.ready.Judges(gvk) {
		verdict, msg, _ := w.deps.ready.Status(gvk, dep.Object)
		return verdict == status.CurrentStatus, strings.Replace(msg, "healthChecks current", "readyExpr", 1)
	}
	gen := dep.GetGeneration()
	og, hasOG, _ := unstructured.NestedInt64(dep.Object, "status", "observedGeneration")
	ready := meta.FindStatusCondition(rstatus.ConditionsOf(dep), rstatus.TypeReady)
	switch {
	case ready == nil:
		return false, "no Ready condition yet"
	case ready.ObservedGeneration != gen || (hasOG && og != gen):
		return false, fmt.Sprintf("generation %d is not reconciled yet", gen)
	case ready.Status != metav1.ConditionTrue:
		return false, fmt.Sprintf("Ready=%s, %s: %s", ready.Status, ready.Reason, ready.Message)
	}
	return true, ""
}
