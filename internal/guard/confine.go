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

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	"github.com/rudder-operator/rudder/internal/release"
)

// scoped is a Confinement with the Scoper of the kinds one check meets: the API server's, and
// those of the chart's crds/.
type scoped struct {
	conf Confinement
	s    *Scoper
}

// check decides one object whose kind's scope c.s knows; a kind neither the API server nor the
// chart's crds/ define is an UnknownKindError. Every per-object check goes through it.
func (c scoped) check(src Source, gvk schema.GroupVersionKind, name, ns string) (*Violation, error) {
	namespaced, err := c.s.Namespaced(gvk)
	if err != nil {
		what := fmt.Sprintf("%s %q (%s): %v", gvk.Kind, name, gvk.GroupVersion(), err)
		if src != SourceManifest {
			what = string(src) + " " + what
		}
		return nil, &UnknownKindError{Object: what}
	}
	return c.conf.checkObject(src, gvk, name, ns, namespaced), nil
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
func (c scoped) checkStream(src Source, hook string, data []byte) ([]Violation, error) {
	var out []Violation
	err := EachObject(data, func(o *unstructured.Unstructured) error {
		gvk := o.GroupVersionKind()
		if gvk.Kind == "" {
			return fmt.Errorf("%s object %q without kind", src, o.GetName())
		}
		vs := c.conf.rules(src, o)
		if len(vs) == 0 {
			v, err := c.check(src, gvk, o.GetName(), o.GetNamespace())
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
func (c scoped) checkHooks(hooks []*release.Hook) ([]Violation, error) {
	var out []Violation
	for _, h := range hooks {
		vs, err := c.checkStream(SourceHook, hookEvents(h), []byte(h.Manifest))
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
func (c scoped) checkCRDs(crds []CRDFile) ([]Violation, error) {
	var out []Violation
	for _, crd := range crds {
		vs, err := c.checkStream(SourceCRD, "", crd.Data)
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
	sc := scoped{c, NewScoper(mapper, crds)}
	if manifest {
		_ = EachObject([]byte(rel.Manifest), func(o *unstructured.Unstructured) error {
			sc.s.Learn(o.Object)
			return nil
		})
	}
	vs, err := sc.checkHooks(rel.Hooks)
	if err != nil {
		return err
	}
	if manifest {
		mv, err := sc.checkStream(SourceManifest, "", []byte(rel.Manifest))
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
	vs, err := scoped{c, NewScoper(mapper, crds)}.checkCRDs(crds)
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
	sc := scoped{c, NewScoper(mapper, nil)}
	var vs []Violation
	for _, o := range objs {
		gvk := o.GroupVersionKind()
		v, err := sc.check(SourceManifest, gvk, o.GetName(), o.GetNamespace())
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
