package helm

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"go.yaml.in/yaml/v2"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/jsonmergepatch"
	"k8s.io/apimachinery/pkg/util/mergepatch"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// ParseManifest decodes a release manifest into objects, giving namespaced objects without a
// namespace the release's namespace (as Helm does when it applies them).
func ParseManifest(manifest, namespace string, mapper meta.RESTMapper) ([]*unstructured.Unstructured, error) {
	dec := utilyaml.NewYAMLOrJSONDecoder(strings.NewReader(manifest), 4096)
	var out []*unstructured.Unstructured
	for {
		var raw map[string]any
		if err := dec.Decode(&raw); err != nil {
			if errors.Is(err, io.EOF) {
				return out, nil
			}
			return nil, fmt.Errorf("parsing release manifest: %w", err)
		}
		if len(raw) == 0 {
			continue
		}
		obj := &unstructured.Unstructured{Object: raw}
		if err := place(obj, namespace, mapper); err != nil {
			return nil, err
		}
		out = append(out, obj)
	}
}

// ParseIdentities is ParseManifest for what identifies each object (apiVersion, kind,
// namespace, name) and the labels and annotations the manifest sets on it (what an operand's
// change is compared with to tell drift from another controller's own metadata), which it sets
// and nothing else: it decodes only those fields, at a fraction of the cost.
func ParseIdentities(manifest, namespace string, mapper meta.RESTMapper) ([]*unstructured.Unstructured, error) {
	docs := utilyaml.NewYAMLReader(bufio.NewReader(strings.NewReader(manifest)))
	var out []*unstructured.Unstructured
	for {
		doc, err := docs.Read()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("parsing release manifest: %w", err)
		}
		var head manifestHead
		if err := yaml.Unmarshal(doc, &head); err != nil {
			return nil, fmt.Errorf("parsing release manifest: %w", err)
		}
		if head.empty() {
			continue // nothing but comments
		}
		obj := Identity(head.APIVersion, head.Kind, head.Metadata.Namespace, head.Metadata.Name)
		setMetadata(obj, metadataStrings(head.Metadata.Labels), metadataStrings(head.Metadata.Annotations))
		if err := place(obj, namespace, mapper); err != nil {
			return nil, err
		}
		out = append(out, obj)
	}
}

// Identity is an object with nothing set but what identifies it: apiVersion, kind, name and,
// unless "", namespace.
func Identity(apiVersion, kind, namespace, name string) *unstructured.Unstructured {
	md := map[string]any{"name": name}
	if namespace != "" {
		md["namespace"] = namespace
	}
	return &unstructured.Unstructured{Object: map[string]any{"apiVersion": apiVersion, "kind": kind, "metadata": md}}
}

// setMetadata gives an identity the labels and annotations of its object, when it has any.
func setMetadata(id *unstructured.Unstructured, labels, annotations map[string]string) {
	if len(labels) > 0 {
		id.SetLabels(labels)
	}
	if len(annotations) > 0 {
		id.SetAnnotations(annotations)
	}
}

// manifestHead is what identifies an object of a manifest, and its labels and annotations.
type manifestHead struct {
	APIVersion string `yaml:"apiVersion"`
	Kind       string `yaml:"kind"`
	Metadata   struct {
		Name        string         `yaml:"name"`
		Namespace   string         `yaml:"namespace"`
		Labels      map[string]any `yaml:"labels"`
		Annotations map[string]any `yaml:"annotations"`
	} `yaml:"metadata"`
}

// empty: the document is nothing but comments.
func (h *manifestHead) empty() bool {
	m := h.Metadata
	return h.APIVersion == "" && h.Kind == "" && m.Name == "" && m.Namespace == "" && len(m.Labels) == 0 && len(m.Annotations) == 0
}

// metadataStrings is a decoded map of labels or annotations as the API server holds it: a value the
// manifest writes as another scalar (a number, a boolean) in its text.
func metadataStrings(m map[string]any) map[string]string {
	if len(m) == 0 {
		return nil
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		s, ok := v.(string)
		if !ok {
			s = fmt.Sprint(v)
		}
		out[k] = s
	}
	return out
}

// place gives a namespaced object without a namespace the release's, and a cluster-scoped one
// none, as Helm does when it applies them.
func place(obj *unstructured.Unstructured, namespace string, mapper meta.RESTMapper) error {
	gvk := obj.GroupVersionKind()
	m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return fmt.Errorf("%s %q: %w", gvk.Kind, obj.GetName(), err)
	}
	if m.Scope.Name() == meta.RESTScopeNameNamespace {
		if obj.GetNamespace() == "" {
			obj.SetNamespace(namespace)
		}
	} else {
		obj.SetNamespace("")
	}
	return nil
}

// Describe names an object in messages: Kind/namespace/name.
func Describe(obj client.Object) string {
	k := obj.GetObjectKind().GroupVersionKind().Kind
	if obj.GetNamespace() == "" {
		return k + "/" + obj.GetName()
	}
	return k + "/" + obj.GetNamespace() + "/" + obj.GetName()
}

// Reapply restores the objects of a release from its manifest without a new revision: a
// missing object is created; fields the manifest sets that someone changed are patched back with
// a three-way merge (as kubectl apply does; the manifest is both the last-applied and the
// desired state), or for a release that applies server-side by server-side apply (see
// applydrift.go); fields others added are left alone, and so are the fields d ignores. With
// d.Warn nothing is written: the drift is only returned. live is read first; it must hold
// whole objects (a stale read costs one no-op patch or an AlreadyExists). It returns the
// objects it restored, and the drift it found.
func Reapply(ctx context.Context, objs []*unstructured.Unstructured, live client.Reader, w client.Writer, d Drift) ([]string, []Drifted,
	error) {
	var restored []string
	var drifted []Drifted
	var errs []error
	for _, want := range objs {
		r, drift, err := d.reapply(ctx, want, live, w)
		switch {
		case err != nil:
			errs = append(errs, err)
		case drift != nil:
			drifted = append(drifted, *drift)
		case r != "":
			restored = append(restored, r)
		}
	}
	return restored, drifted, errors.Join(errs...)
}

// reapply restores one object of the manifest as Reapply does, and names what it restored
// ("": nothing); with d.Warn it only returns the drift.
func (d Drift) reapply(ctx context.Context, want *unstructured.Unstructured, live client.Reader, w client.Writer) (string, *Drifted,
	error) {
	cur := &unstructured.Unstructured{}
	cur.SetGroupVersionKind(want.GroupVersionKind())
	err := live.Get(ctx, client.ObjectKeyFromObject(want), cur)
	switch {
	case apierrors.IsNotFound(err) && d.Warn:
		return "", &Drifted{Object: Describe(want), Missing: true}, nil
	case apierrors.IsNotFound(err):
		create := func() error { return w.Create(ctx, want.DeepCopy()) }
		if d.ServerSide {
			create = func() error {
				_, err := applyObjectAs(ctx, w, d.applied(want, nil))
				return err
			}
		}
		switch err := create(); {
		case apierrors.IsAlreadyExists(err):
			return "", nil, nil
		case err != nil:
			return "", nil, fmt.Errorf("recreating %s: %w", Describe(want), err)
		}
		return Describe(want) + " (recreated)", nil, nil
	case err != nil:
		return "", nil, fmt.Errorf("reading %s: %w", Describe(want), err)
	case cur.GetDeletionTimestamp() != nil:
		// Being deleted (by someone else or garbage collection): the next event recreates it.
		return "", nil, nil
	case d.ServerSide:
		return d.reapplyServerSide(ctx, w, want, cur)
	}
	desired := d.desired(want)
	patch, pt, err := threeWayPatch(desired, desired, cur)
	switch {
	case err != nil:
		return "", nil, fmt.Errorf("diffing %s: %w", Describe(want), err)
	case patch == nil:
		return "", nil, nil
	case d.Warn:
		paths, err := driftPaths(desired, cur)
		if err != nil {
			return "", nil, fmt.Errorf("diffing %s: %w", Describe(want), err)
		}
		return "", &Drifted{Object: Describe(want), Paths: paths}, nil
	}
	if err := w.Patch(ctx, cur, client.RawPatch(pt, patch)); err != nil {
		return "", nil, fmt.Errorf("restoring %s: %w", Describe(want), err)
	}
	return Describe(want) + " (reverted)", nil, nil
}

// reapplyServerSide restores what an apply of want changes on cur, and names it ("": there
// was nothing to restore); with d.Warn it only returns the drift. An object whose fields a
// rudder before abf8a42 holds is applied even without drift, and its fields moved
// (fieldowner.go).
func (d Drift) reapplyServerSide(ctx context.Context, w client.Writer, want, cur *unstructured.Unstructured) (string, *Drifted, error) {
	desired := d.applied(want, cur)
	paths, answer, err := applyDrift(ctx, w, desired, cur)
	switch {
	case err != nil:
		return "", nil, fmt.Errorf("diffing %s by a dry-run apply: %w", Describe(want), err)
	case d.Warn && len(paths) > 0:
		return "", &Drifted{Object: Describe(want), Paths: paths}, nil
	case d.Warn, len(paths) == 0 && !holdsLegacy(answer):
		return "", nil, nil
	}
	applied, err := applyObjectAs(ctx, w, desired)
	if err != nil {
		return "", nil, fmt.Errorf("restoring %s: %w", Describe(want), err)
	}
	if err := moveLegacyFields(ctx, w, applied); err != nil {
		return "", nil, fmt.Errorf("moving the fields of %s from field manager %s to %s: %w", Describe(want), legacyFieldManager, FieldManager,
			err)
	}
	if len(paths) == 0 {
		return "", nil, nil
	}
	return Describe(want) + " (reverted)", nil, nil
}

// threeWayPatch is the patch that takes cur to desired, given orig as what was applied last,
// as Helm's update and kubectl apply make it: a three-way strategic merge for built-in kinds,
// else a three-way JSON merge patch. It is nil when there is nothing to change. Drift
// re-apply passes the manifest as both orig and desired: then it restores every field the
// manifest sets and leaves the fields others added.
func threeWayPatch(orig, desired, cur runtime.Object) ([]byte, types.PatchType, error) {
	old, err := json.Marshal(orig)
	if err != nil {
		return nil, "", err
	}
	want, err := json.Marshal(desired)
	if err != nil {
		return nil, "", err
	}
	current, err := json.Marshal(cur)
	if err != nil {
		return nil, "", err
	}
	var patch []byte
	pt := types.StrategicMergePatchType
	if typed, err := scheme.Scheme.New(desired.GetObjectKind().GroupVersionKind()); err == nil {
		meta, err := strategicpatch.NewPatchMetaFromStruct(typed)
		if err != nil {
			return nil, "", err
		}
		patch, err = strategicpatch.CreateThreeWayMergePatch(old, want, current, meta, true)
		if err != nil {
			return nil, "", err
		}
	} else {
		pt = types.MergePatchType
		patch, err = jsonmergepatch.CreateThreeWayJSONMergePatch(old, want, current,
			mergepatch.RequireKeyUnchanged("apiVersion"), mergepatch.RequireKeyUnchanged("kind"))
		if err != nil {
			return nil, "", err
		}
	}
	if len(bytes.TrimSpace(patch)) == 0 || string(bytes.TrimSpace(patch)) == "{}" {
		return nil, "", nil
	}
	return patch, pt, nil
}
