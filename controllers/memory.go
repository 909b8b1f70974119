package controllers

import (
	"slices"
	"strings"
	"unique"

	"helm.sh/helm/v3/pkg/release"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rudder-operator/rudder/internal/helm"
)

// What a Reconciler remembers of each CR between passes, besides its caches: which CRs need a
// drift check, and the identities of the objects of each release's newest revision.

// drift is why a pass must check drift.
type drift uint8

const (
	// driftChanged: an operand was changed or deleted by someone, or this process has not
	// checked the CR yet: compare every object with the manifest.
	driftChanged drift = 1 << iota
	// driftMissing: an operand was not in the cache (it may only have been late): enough that
	// every object is there.
	driftMissing
)

// markDirty asks the next pass of key to check drift.
func (r *Reconciler) markDirty(key types.NamespacedName) { r.mark(key, driftChanged) }

// markMissing asks the next pass of key to check that every operand exists.
func (r *Reconciler) markMissing(key types.NamespacedName) { r.mark(key, driftMissing) }

func (r *Reconciler) mark(key types.NamespacedName, d drift) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.dirty[key] |= d
}

// takeDrift reports (and clears) what a pass must check of drift: everything when an operand
// changed or this process has not checked this CR yet, only presence when an operand was not
// seen, nothing (0) otherwise.
func (r *Reconciler) takeDrift(key types.NamespacedName, uid types.UID) drift {
	r.mu.Lock()
	defer r.mu.Unlock()
	d := r.dirty[key]
	if r.verified[key] != uid {
		d |= driftChanged
	}
	delete(r.dirty, key)
	r.verified[key] = uid
	return d
}

// markVerified records that the objects of key's release (of the CR with uid) are as the
// manifest says (Helm just applied them), without clearing a drift mark an operand event set
// meanwhile.
func (r *Reconciler) markVerified(key types.NamespacedName, uid types.UID) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.verified[key] = uid
}

// manifestObjects parses a release manifest, into whole objects or only their identities. It
// keeps, per CR, only the identity of the newest revision's objects (apiVersion, kind,
// namespace, name: what readiness and the dependent watches need), not the objects: drift
// re-apply, which needs them whole, reads the revision again.
func (r *Reconciler) manifestObjects(key types.NamespacedName, rel *release.Release, whole bool) ([]*unstructured.Unstructured, error) {
	parse := helm.ParseIdentities
	if whole {
		parse = helm.ParseManifest
	}
	objs, err := parse(rel.Manifest, rel.Namespace, r.opts.Client.RESTMapper())
	if err != nil {
		return nil, err
	}
	r.rememberObjects(key, rel.Version, objs)
	return objs, nil
}

// rememberObjects keeps the identities of the objects of key's newest revision, and the keys
// of the labels and annotations each sets (objs are whole, or identities with their metadata).
func (r *Reconciler) rememberObjects(key types.NamespacedName, revision int, objs []*unstructured.Unstructured) {
	ids := make([]objectID, len(objs))
	for i, o := range objs {
		ids[i] = objectID{apiVersion: o.GetAPIVersion(), kind: o.GetKind(), namespace: o.GetNamespace(), name: o.GetName(),
			metadata: metadataKeys(o.GetLabels(), o.GetAnnotations())}
	}
	r.mu.Lock()
	r.manifests[key] = parsedManifest{revision: revision, objects: ids}
	r.mu.Unlock()
}

// cachedManifest returns the identities of a revision's objects, as objects with nothing else
// set, if this process has them.
func (r *Reconciler) cachedManifest(key types.NamespacedName, revision int) ([]*unstructured.Unstructured, bool) {
	r.mu.Lock()
	pm, ok := r.manifests[key]
	r.mu.Unlock()
	if !ok || pm.revision != revision {
		return nil, false
	}
	objs := make([]*unstructured.Unstructured, len(pm.objects))
	for i, id := range pm.objects {
		objs[i] = id.unstructured()
	}
	return objs, true
}

// metadataKeys is the set of label ("l=") and annotation ("a=") keys an object of a manifest
// sets, one per line between newlines, interned.
func metadataKeys(labels, annotations map[string]string) unique.Handle[string] {
	keys := make([]string, 0, len(labels)+len(annotations))
	for k := range labels {
		keys = append(keys, "l="+k)
	}
	for k := range annotations {
		keys = append(keys, "a="+k)
	}
	slices.Sort(keys)
	return unique.Make("\n" + strings.Join(keys, "\n") + "\n")
}

// manifestMetadataChanged reports whether an update of an operand of key (of kind gk) changed
// a label or an annotation that its release's newest manifest sets — what drift re-apply
// restores — or may have: this process does not know that manifest's keys. A change of
// metadata another controller keeps on the object (a Deployment's revision annotation) is no
// drift: re-apply would leave it as it is, so it asks for no reading of the release's objects.
func (r *Reconciler) manifestMetadataChanged(key types.NamespacedName, gk schema.GroupKind, old, cur client.Object) bool {
	changed := changedMetadata(old, cur)
	if len(changed) == 0 {
		return false
	}
	r.mu.Lock()
	pm, ok := r.manifests[key]
	r.mu.Unlock()
	if !ok {
		return true
	}
	i := slices.IndexFunc(pm.objects, func(id objectID) bool {
		gv, _ := schema.ParseGroupVersion(id.apiVersion)
		return id.kind == gk.Kind && gv.Group == gk.Group && id.namespace == cur.GetNamespace() && id.name == cur.GetName()
	})
	if i < 0 {
		return true
	}
	set := pm.objects[i].metadata.Value()
	return slices.ContainsFunc(changed, func(k string) bool { return strings.Contains(set, "\n"+k+"\n") })
}

// changedMetadata are the keys of the labels ("l=") and annotations ("a=") whose values
// differ between two versions of an operand, the cached verdict aside (it changes with the
// status, which asks for no drift check).
func changedMetadata(old, cur client.Object) []string {
	changed := changedKeys(nil, "l=", old.GetLabels(), cur.GetLabels())
	return changedKeys(changed, "a=", withoutVerdict(old.GetAnnotations()), withoutVerdict(cur.GetAnnotations()))
}

// changedKeys appends to out, each prefixed, the keys whose values differ between a and b
// (set in one only included).
func changedKeys(out []string, prefix string, a, b map[string]string) []string {
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			out = append(out, prefix+k)
		}
	}
	for k := range b {
		if _, ok := a[k]; !ok {
			out = append(out, prefix+k)
		}
	}
	return out
}
