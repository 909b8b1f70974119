package helm

import (
	"context"
	"maps"
	"slices"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Drift of a release that applies server-side is seen and restored by server-side apply, as
// its upgrades apply it: a dry run of the apply shows what the apply would change on the live
// object (nothing: no drift), and the apply restores it. What the apply sends is the whole of
// what FieldManager holds on the object, so nothing the release set is dropped by omission:
// the manifest, the ownership metadata Helm adds as it applies, and — where the watch ignores
// a field — the field as it is live, so that an ignored field keeps its value (an HPA's
// replicas) rather than being let go and reset. Fields only other managers set are not in the
// apply and stay as they are. The restore takes the fields another manager changed back
// (ForceOwnership): they are the drift.

// applied is what an apply of want restores on cur: want with Helm's ownership metadata of
// the release (helm.sh/helm/v4 pkg/action, setMetadataVisitor), and each field d ignores on it as cur has it (absent when cur has
// none).
func (d Drift) applied(want, cur *unstructured.Unstructured) *unstructured.Unstructured {
	out := want.DeepCopy()
	labels := out.GetLabels()
	if labels == nil {
		labels = map[string]string{}
	}
	labels[helmManagedBy] = "Helm"
	out.SetLabels(labels)
	annotations := maps.Clone(out.GetAnnotations())
	if annotations == nil {
		annotations = map[string]string{}
	}
	annotations[helmReleaseName], annotations[helmReleaseNamespace] = d.Release, d.Namespace
	out.SetAnnotations(annotations)
	if d.Ignored == nil || cur == nil {
		return out
	}
	for _, p := range d.Ignored(want) {
		if v, ok := pointerValue(cur.Object, p); ok {
			setPointer(out.Object, p, jsonCopy(v))
		} else {
			removePointer(out.Object, p)
		}
	}
	return out
}

// applyDrift is the drift a server-side apply of desired would restore on cur, as JSON pointers
// (nil: none), asked of the API server with a dry run, and the dry run's answer.
func applyDrift(ctx context.Context, w client.Writer, desired, cur *unstructured.Unstructured) ([]string, *unstructured.Unstructured,
	error) {
	after := desired.DeepCopy()
	if err := w.Apply(ctx, client.ApplyConfigurationFromUnstructured(after), client.FieldOwner(FieldManager),
		client.ForceOwnership, client.DryRunAll); err != nil {
		return nil, nil, err
	}
	a, c := comparable(after), comparable(cur)
	changed, err := driftPaths(a, c)
	if err != nil {
		return nil, nil, err
	}
	removed, err := driftPaths(c, a) // what the apply would take away
	if err != nil {
		return nil, nil, err
	}
	for _, p := range removed {
		if !slices.Contains(changed, p) {
			changed = append(changed, p)
		}
	}
	return changed, after, nil
}

// comparable is obj without what an apply changes whether or not anything drifted (its
// managed fields, resourceVersion and generation) and without its status, which an apply does
// not write and the live read may hold older.
func comparable(obj *unstructured.Unstructured) *unstructured.Unstructured {
	out := obj.DeepCopy()
	delete(out.Object, "status")
	unstructured.RemoveNestedField(out.Object, "metadata", "managedFields")
	unstructured.RemoveNestedField(out.Object, "metadata", "resourceVersion")
	unstructured.RemoveNestedField(out.Object, "metadata", "generation")
	return out
}

// applyObjectAs applies obj server-side as FieldManager, taking the fields it sets, and returns
// the API server's answer.
func applyObjectAs(ctx context.Context, w client.Writer, obj *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	answer := obj.DeepCopy()
	err := w.Apply(ctx, client.ApplyConfigurationFromUnstructured(answer), client.FieldOwner(FieldManager), client.ForceOwnership)
	return answer, err
}

// holdsLegacy reports whether legacyFieldManager holds fields of obj.
func holdsLegacy(obj *unstructured.Unstructured) bool {
	return slices.ContainsFunc(obj.GetManagedFields(), func(e metav1.ManagedFieldsEntry) bool { return e.Manager == legacyFieldManager })
}

// moveLegacyFields moves what legacyFieldManager holds on obj (as read: its managedFields and
// resourceVersion) to FieldManager (see foldLegacy). A conflict (the object changed since) is
// left to the next check.
func moveLegacyFields(ctx context.Context, w client.Writer, obj *unstructured.Unstructured) error {
	patch, err := foldLegacy(obj.GetManagedFields(), obj.GetResourceVersion())
	if err != nil || patch == nil {
		return err
	}
	if err := w.Patch(ctx, obj, client.RawPatch(types.JSONPatchType, patch)); err != nil && !apierrors.IsConflict(err) {
		return err
	}
	return nil
}

// jsonCopy is a deep copy of a JSON value as the post-renderer decodes it, with the numbers a
// JSON decode would give: an integer past int64's range (kept exactly, as uint64) becomes a
// float64, as sigs.k8s.io/json reads it.
func jsonCopy(v any) any {
	switch t := v.(type) {
	case map[string]any:
		m := make(map[string]any, len(t))
		for k, e := range t {
			m[k] = jsonCopy(e)
		}
		return m
	case []any:
		s := make([]any, len(t))
		for i, e := range t {
			s[i] = jsonCopy(e)
		}
		return s
	case uint64:
		return float64(t)
	}
	return v
}

// Helm's marks of the objects a release owns: an object that carries them is adopted by the
// release's install or upgrade instead of being refused as one that exists.
const (
	helmManagedBy        = "app.kubernetes.io/managed-by"
	helmReleaseName      = "meta.helm.sh/release-name"
	helmReleaseNamespace = "meta.helm.sh/release-namespace"
)
