package helm

import (
	"bytes"
	"cmp"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"

	release "helm.sh/helm/v4/pkg/release/v1"
	releaseutil "helm.sh/helm/v4/pkg/release/v1/util"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/rudder-operator/rudder/internal/guard"
	"github.com/rudder-operator/rudder/internal/records"
)

// postRenderer checks confinement and marks every object of a release's manifest as the
// owner's: an owner reference where one can point (namespaced objects in the owner's
// namespace; garbage collection then backs up uninstall), and always the managed label and
// owner annotation. It runs on the render's manifests before Helm's action (see
// renderFiles), not as Helm's post-renderer: Helm 4 merges a post-renderer's input into one
// stream and splits its output again, parsing and writing every document with kyaml twice
// more, and rudder's post-render needs neither. Hooks are not post-rendered, as in Helm 3.
type postRenderer struct {
	owner  guard.Owner
	conf   guard.Confinement
	scoper *guard.Scoper
	// carried are the owner's labels shards select on, put on every object.
	carried map[string]string
	limits  Limits
	// release is the release's name (Helm's ownership annotation of what rudder creates for it).
	release string

	// objects are the objects the last run wrote; identities are the objects' as
	// ParseIdentities finds them in the text; written is each object by the text it was
	// written as (a document, without its separator, trimmed), which Build then finds in the
	// manifest Helm assembles from the render.
	objects    []map[string]any
	identities []*unstructured.Unstructured
	written    map[string]map[string]any
	// crds are the CustomResourceDefinitions among the objects the last run decoded.
	crds []map[string]any
}

// renderFiles post-renders the manifests of a render, as Helm's action sorts them from files
// (one document each), and returns the files to render instead: each file with its
// manifests' documents written again after its hooks' documents, untouched. Helm's action
// sorts them again into the same manifests and hooks, in the same order. A nil p leaves the
// files as they are.
func (p *postRenderer) renderFiles(files map[string]string, manifests []releaseutil.Manifest, hooks []*release.Hook) (map[string]string,
	error) {
	if p == nil {
		return files, nil
	}
	streams := make([][]byte, len(manifests))
	for i, m := range manifests {
		streams[i] = []byte(m.Content)
	}
	docs, err := p.run(streams)
	if err != nil {
		return nil, err
	}
	out := maps.Clone(files)
	for _, h := range hooks {
		delete(out, h.Path)
	}
	for _, m := range manifests {
		delete(out, m.Name)
	}
	add := func(file, doc string) {
		if prev, ok := out[file]; ok {
			doc = prev + "\n---\n" + doc
		}
		out[file] = doc
	}
	for _, h := range hooks {
		add(h.Path, h.Manifest)
	}
	for i, m := range manifests {
		for _, d := range docs[i] {
			add(m.Name, d)
		}
	}
	return out, nil
}

// run checks, marks and writes again the objects of each stream, and returns the documents
// it wrote for each (without their separators).
func (p *postRenderer) run(streams [][]byte) ([][]string, error) {
	p.objects, p.identities, p.written, p.crds = nil, nil, nil, nil
	size := 0
	for _, s := range streams {
		size += len(s)
	}
	if int64(size) > p.limits.manifestBytes() {
		return nil, limitError(LimitManifestBytes, p.limits.manifestBytes(), fmt.Sprintf("the rendered manifest is %d bytes", size))
	}
	raws, err := p.decode(streams)
	if err != nil {
		return nil, err
	}
	docs := make([][]string, len(streams))
	objects := make([]map[string]any, 0, len(raws))
	identities := make([]*unstructured.Unstructured, 0, len(raws))
	written := make(map[string]map[string]any, len(raws))
	var violations []guard.Violation
	ownerAnn := records.OwnerAnnotation(p.owner.GVK.GroupKind(), p.owner.Key)
	var doc bytes.Buffer
	for _, d := range raws {
		obj := &unstructured.Unstructured{Object: d.raw}
		gvk := obj.GroupVersionKind()
		if gvk.Kind == "" {
			return nil, fmt.Errorf("rendered object without kind: %v", d.raw)
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
		doc.Reset()
		if err := writeYAML(&doc, obj.Object); err != nil {
			return nil, err
		}
		text := doc.String()
		docs[d.stream] = append(docs[d.stream], text)
		written[strings.TrimSpace(text)] = obj.Object
		objects = append(objects, obj.Object)
		identities = append(identities, p.identity(obj, namespaced))
	}
	if len(violations) > 0 {
		return nil, &guard.ConfinementError{Violations: violations}
	}
	p.objects, p.identities, p.written = objects, identities, written
	return docs, nil
}

// decoded is an object of a post-renderer's input, and the stream it came from.
type decoded struct {
	stream int
	raw    map[string]any
}

// decode decodes the objects of the streams, and learns the kinds their CRDs define (p.crds).
func (p *postRenderer) decode(streams [][]byte) ([]decoded, error) {
	var raws []decoded
	for i, s := range streams {
		if err := guard.EachObject(s, func(o *unstructured.Unstructured) error {
			raws = append(raws, decoded{i, o.Object})
			if p.scoper.Learn(o.Object) {
				p.crds = append(p.crds, o.Object)
			}
			return nil
		}); err != nil {
			return nil, fmt.Errorf("parsing rendered manifests: %w", err)
		}
	}
	return raws, nil
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

// made are the identities of the objects the last run wrote, as ParseIdentities finds them in
// its output: those of the revision an action stores after its one render (the only run of
// the action's post-renderer).
func (p *postRenderer) made() []*unstructured.Unstructured {
	if p == nil {
		return nil
	}
	return p.identities
}

// rendered are the objects the last run wrote, whole.
func (p *postRenderer) rendered() []*unstructured.Unstructured {
	if p == nil {
		return nil
	}
	out := make([]*unstructured.Unstructured, len(p.objects))
	for i, o := range p.objects {
		out[i] = &unstructured.Unstructured{Object: o}
	}
	return out
}

// objectsOf are the objects of manifest, in its order, when each of its documents (after its
// comments) is one the last run wrote; else nil.
func (p *postRenderer) objectsOf(manifest string) []map[string]any {
	if p == nil || p.written == nil {
		return nil
	}
	docs := releaseutil.SplitManifests(manifest)
	keys := make([]string, 0, len(docs))
	for k := range docs {
		keys = append(keys, k)
	}
	sort.Sort(releaseutil.BySplitManifestsOrder(keys))
	objs := make([]map[string]any, 0, len(keys))
	for _, k := range keys {
		doc := docs[k]
		for strings.HasPrefix(doc, "#") {
			_, doc, _ = strings.Cut(doc, "\n")
		}
		o := p.written[strings.TrimSpace(doc)]
		if o == nil {
			return nil
		}
		objs = append(objs, o)
	}
	return objs
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

// hookMarker marks a release's hooks as the post-renderer marks its manifest.
type hookMarker struct {
	post *postRenderer
}

// markHooks gives every hook of rel the owner's labels, annotation and, in the owner's
// namespace, owner reference (so that deleting the CR removes the hooks that are kept). It is
// idempotent. A hook that does not parse is left as it is: the check refuses it.
func (m *hookMarker) markHooks(rel *release.Release) {
	if m == nil || rel == nil {
		return
	}
	ownerAnn := guard.OwnerOf(m.post.owner)
	for _, h := range rel.Hooks {
		var out bytes.Buffer
		err := guard.EachObject([]byte(h.Manifest), func(obj *unstructured.Unstructured) error {
			namespaced, err := m.post.scoper.Namespaced(obj.GroupVersionKind())
			if err != nil {
				return err
			}
			m.post.mark(obj, ownerAnn, namespaced)
			if out.Len() > 0 {
				out.WriteString("---\n")
			}
			return writeYAML(&out, obj.Object)
		})
		if err == nil && out.Len() > 0 {
			h.Manifest = out.String()
		}
	}
}
