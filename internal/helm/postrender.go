package helm

import (
	"bytes"
	"cmp"
	"fmt"
	"maps"
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/rudder-operator/rudder/internal/guard"
	"github.com/rudder-operator/rudder/internal/records"
)

// postRenderer checks confinement and marks every object as the owner's: an owner reference
// where one can point (namespaced objects in the owner's namespace; garbage collection then
// backs up uninstall), and always the managed label and owner annotation.
type postRenderer struct {
	owner  guard.Owner
	conf   guard.Confinement
	scoper *guard.Scoper
	// carried are the owner's labels shards select on, put on every object.
	carried map[string]string
	limits  Limits
	// release is the release's name (Helm's ownership annotation of what rudder creates for it).
	release string

	// manifest and objects are what the last Run wrote: the text, and the objects in it;
	// identities are the objects' as ParseIdentities finds them in the text.
	manifest   string
	objects    []map[string]any
	identities []*unstructured.Unstructured
	// crds are the CustomResourceDefinitions among the objects the last Run decoded.
	crds []map[string]any
}

func (p *postRenderer) Run(in *bytes.Buffer) (*bytes.Buffer, error) {
	p.manifest, p.objects, p.identities = "", nil, nil
	if int64(in.Len()) > p.limits.manifestBytes() {
		return nil, limitError(LimitManifestBytes, p.limits.manifestBytes(), fmt.Sprintf("the rendered manifest is %d bytes", in.Len()))
	}
	var raws []map[string]any
	p.crds = nil
	if err := guard.EachObject(in.Bytes(), func(o *unstructured.Unstructured) error {
		raws = append(raws, o.Object)
		if p.scoper.Learn(o.Object) {
			p.crds = append(p.crds, o.Object)
		}
		return nil
	}); err != nil {
		return nil, fmt.Errorf("parsing rendered manifests: %w", err)
	}
	var out bytes.Buffer
	var objects []map[string]any
	var identities []*unstructured.Unstructured
	var violations []guard.Violation
	ownerAnn := records.OwnerAnnotation(p.owner.GVK.GroupKind(), p.owner.Key)
	for _, raw := range raws {
		obj := &unstructured.Unstructured{Object: raw}
		gvk := obj.GroupVersionKind()
		if gvk.Kind == "" {
			return nil, fmt.Errorf("rendered object without kind: %v", raw)
		}
		namespaced, err := p.scoper.Namespaced(gvk)
		if err != nil {
			return nil, &guard.UnknownKindError{Object: fmt.Sprintf("%s %q (%s): %v", gvk.Kind, obj.GetName(), gvk.GroupVersion(), err)}
		}
		violations = append(violations, p.conf.CheckManifestObject(obj, namespaced)...)
		if len(objects) == p.limits.objects() {
			return nil, limitError(LimitObjects, int64(p.limits.objects()), "the manifest renders more objects than that")
		}
		p.mark(obj, ownerAnn, namespaced)
		// Straight to YAML: the bytes sigs.k8s.io/yaml.Marshal writes (JSON first, then that
		// JSON parsed as YAML and written again), by rudder's writer when it is sure of them,
		// else by yaml.v2.
		out.WriteString("---\n")
		if err := writeYAML(&out, obj.Object); err != nil {
			return nil, err
		}
		objects = append(objects, obj.Object)
		identities = append(identities, p.identity(obj, namespaced))
	}
	if len(violations) > 0 {
		return nil, &guard.ConfinementError{Violations: violations}
	}
	p.manifest, p.objects, p.identities = out.String(), objects, identities
	return &out, nil
}

// identity is an object's apiVersion, kind, name and namespace, placed as Helm applies it
// (see place), with its labels and annotations: what ParseIdentities finds of it.
func (p *postRenderer) identity(obj *unstructured.Unstructured, namespaced bool) *unstructured.Unstructured {
	ns := ""
	if namespaced {
		ns = cmp.Or(obj.GetNamespace(), p.conf.Namespace)
	}
	id := Identity(obj.GetAPIVersion(), obj.GetKind(), ns, obj.GetName())
	setMetadata(id, obj.GetLabels(), obj.GetAnnotations())
	return id
}

// made are the identities of the objects the last Run wrote, as ParseIdentities finds them in
// its output: those of the revision an action stores after its one render. Helm 4 parses and
// re-writes the post-rendered manifest before it stores it (kyaml: the same objects in other
// text), so the stored manifest is not compared with the output; the action's own render is
// the only Run of the action's post-renderer.
func (p *postRenderer) made() []*unstructured.Unstructured {
	if p == nil {
		return nil
	}
	return p.identities
}

// mark labels an object as rudder's operand, annotates its owner, and, in the owner's
// namespace, gives it an owner reference to the CR.
func (p *postRenderer) mark(obj *unstructured.Unstructured, ownerAnn string, namespaced bool) {
	lbls := obj.GetLabels()
	if lbls == nil {
		lbls = map[string]string{}
	}
	lbls[records.LabelManaged] = "true"
	maps.Copy(lbls, p.carried)
	obj.SetLabels(lbls)
	ann := obj.GetAnnotations()
	if ann == nil {
		ann = map[string]string{}
	}
	ann[records.AnnotationOwner] = ownerAnn
	obj.SetAnnotations(ann)
	if !namespaced || (obj.GetNamespace() != "" && obj.GetNamespace() != p.owner.Key.Namespace) {
		return
	}
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
