package helm

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

// Owner is the CR a release belongs to.
type Owner struct {
	GVK schema.GroupVersionKind
	Key types.NamespacedName
	UID types.UID
}

// Confinement says where rendered objects may live.
type Confinement struct {
	// AllowedNamespaces besides the owner's; "*" allows any.
	AllowedNamespaces []string
	// AllowClusterScoped kinds, as "Kind" or "Kind.group".
	AllowClusterScoped []string
}

// ConfinementError is returned when a chart renders an object outside what the watch allows.
// Nothing has been applied when it is returned.
type ConfinementError struct{ Objects []string }

func (e *ConfinementError) Error() string {
	return "rendered objects outside the allowed scope (nothing was applied): " + strings.Join(e.Objects, "; ")
}

// UnknownKindError is returned when a chart renders a kind the API server does not serve.
type UnknownKindError struct{ Object string }

func (e *UnknownKindError) Error() string {
	return "rendered object of a kind the API server does not serve: " + e.Object
}

// postRenderer checks confinement and marks every object as the owner's: an owner reference
// where one can point (namespaced objects in the owner's namespace; garbage collection then
// backs up uninstall), and always the managed label and owner annotation.
type postRenderer struct {
	owner  Owner
	conf   Confinement
	mapper meta.RESTMapper
}

func (p *postRenderer) Run(in *bytes.Buffer) (*bytes.Buffer, error) {
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(in.Bytes()), 4096)
	var out bytes.Buffer
	var violations []string
	ownerAnn := OwnerAnnotation(p.owner.GVK.GroupKind(), p.owner.Key)
	for {
		var raw map[string]any
		if err := dec.Decode(&raw); err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			return nil, fmt.Errorf("parsing rendered manifests: %w", err)
		}
		if len(raw) == 0 {
			continue
		}
		obj := &unstructured.Unstructured{Object: raw}
		gvk := obj.GroupVersionKind()
		if gvk.Kind == "" {
			return nil, fmt.Errorf("rendered object without kind: %v", raw)
		}
		desc := fmt.Sprintf("%s %q", gvk.Kind, obj.GetName())
		mapping, err := p.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			return nil, &UnknownKindError{Object: fmt.Sprintf("%s (%s): %v", desc, gvk.GroupVersion(), err)}
		}
		namespaced := mapping.Scope.Name() == meta.RESTScopeNameNamespace
		sameNS := false
		if namespaced {
			ns := obj.GetNamespace()
			if ns == "" {
				ns = p.owner.Key.Namespace
			}
			sameNS = ns == p.owner.Key.Namespace
			if !sameNS && !slices.Contains(p.conf.AllowedNamespaces, ns) && !slices.Contains(p.conf.AllowedNamespaces, "*") {
				violations = append(violations, fmt.Sprintf("%s is in namespace %q, outside %q", desc, ns, p.owner.Key.Namespace))
			}
		} else {
			k := gvk.Kind
			kg := gvk.Kind + "." + gvk.Group
			if !slices.Contains(p.conf.AllowClusterScoped, k) && !slices.Contains(p.conf.AllowClusterScoped, kg) {
				violations = append(violations, fmt.Sprintf("%s is cluster-scoped and the watch does not allow %s", desc, k))
			}
		}
		lbls := obj.GetLabels()
		if lbls == nil {
			lbls = map[string]string{}
		}
		lbls[LabelManaged] = "true"
		obj.SetLabels(lbls)
		ann := obj.GetAnnotations()
		if ann == nil {
			ann = map[string]string{}
		}
		ann[AnnotationOwner] = ownerAnn
		obj.SetAnnotations(ann)
		if sameNS {
			refs := obj.GetOwnerReferences()
			if !slices.ContainsFunc(refs, func(r metav1.OwnerReference) bool { return r.UID == p.owner.UID }) {
				refs = append(refs, metav1.OwnerReference{
					APIVersion:         p.owner.GVK.GroupVersion().String(),
					Kind:               p.owner.GVK.Kind,
					Name:               p.owner.Key.Name,
					UID:                p.owner.UID,
					BlockOwnerDeletion: new(true),
				})
				obj.SetOwnerReferences(refs)
			}
		}
		b, err := yaml.Marshal(obj.Object)
		if err != nil {
			return nil, err
		}
		out.WriteString("---\n")
		out.Write(b)
	}
	if len(violations) > 0 {
		return nil, &ConfinementError{Objects: violations}
	}
	return &out, nil
}
