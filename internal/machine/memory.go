package machine

import (
	"slices"
	"strings"
	"sync"
	"unique"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rudder-operator/rudder/internal/helm"
	"github.com/rudder-operator/rudder/internal/records"
	"github.com/rudder-operator/rudder/internal/release"
	"github.com/rudder-operator/rudder/internal/watches"
)

// Memory is what the passes of one watch remember of each CR between them, besides the
// caches: which CRs need a drift check, the identities of the objects of each release's
// newest revision, and the phase each CR's last pass ended in (the rudder_release_state
// gauge). The controller marks drift from operand events (MarkDirty, MetadataChanged) and
// forgets a CR that is gone (Forget).
type Memory struct {
	label string // the watch's metrics label
	mu    sync.Mutex
	// dirty CRs had an operand changed or deleted by someone, or not seen in the cache:
	// check drift on the next pass.
	dirty map[types.NamespacedName]drift
	// verified CRs (by key, the UID of the CR checked) had their drift checked at least once
	// by this process.
	verified map[types.NamespacedName]types.UID
	// manifests are the identities of the objects of each release's newest revision.
	manifests map[types.NamespacedName]parsedManifest
	// states is the phase each CR's last pass ended in, for the rudder_release_state gauge
	// (whose label "state" holds that phase, not the release state the pass decided from).
	states map[types.NamespacedName]string
	// unrecorded are the facts of each release that has no record to carry them, by CR key.
	unrecorded map[types.NamespacedName]unrecorded
}

// unrecorded are the facts a pass learned of a release with no revision (an install refused
// before Helm stored anything: the confinement rule stores no revision of it), of the CR
// with uid, and the message of the failure among them. They are derived, not kept: a new
// process that does not have them renders the release again and is refused again.
type unrecorded struct {
	uid     types.UID
	facts   records.Facts
	message string
}

// NewMemory is the memory of the passes of watch w.
func NewMemory(w *watches.Watch) *Memory {
	return &Memory{label: w.String(), dirty: map[types.NamespacedName]drift{}, verified: map[types.NamespacedName]types.UID{},
		manifests: map[types.NamespacedName]parsedManifest{}, states: map[types.NamespacedName]string{},
		unrecorded: map[types.NamespacedName]unrecorded{}}
}

// parsedManifest is what Memory keeps of a release's newest revision: the identities of its
// objects.
type parsedManifest struct {
	revision int
	objects  []objectID
}

// objectID is one object's identity, as compact as it gets: 2000 releases keep 4000 of them.
// metadata holds the keys of the labels and annotations its manifest sets (see
// metadataKeys), one copy for every object that sets the same ones: the same template in
// every release of a chart.
type objectID struct {
	apiVersion, kind, namespace, name string
	metadata                          unique.Handle[string]
}

// unstructured is the identity as an object with nothing else set.
func (id objectID) unstructured() *unstructured.Unstructured {
	return helm.Identity(id.apiVersion, id.kind, id.namespace, id.name)
}

// Forget drops all that is remembered of the CR at key.
func (m *Memory) Forget(key types.NamespacedName) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.dirty, key)
	delete(m.verified, key)
	delete(m.manifests, key)
	delete(m.unrecorded, key)
	if old, ok := m.states[key]; ok {
		releaseStates.DeleteLabelValues(m.label, key.Namespace, key.Name, old)
		delete(m.states, key)
	}
}

// keepUnrecorded remembers the facts f of the release of the CR at key (with uid) that has no
// record, and the message of the failure among them; facts that are all zero are forgotten.
func (m *Memory) keepUnrecorded(key types.NamespacedName, uid types.UID, f records.Facts, message string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if f.Equal(&records.Facts{}) {
		delete(m.unrecorded, key)
		return
	}
	m.unrecorded[key] = unrecorded{uid: uid, facts: f, message: message}
}

// unrecordedFacts are the facts kept of the release of the CR at key (with uid) while it had
// no record (see keepUnrecorded), and the message of the failure among them.
func (m *Memory) unrecordedFacts(key types.NamespacedName, uid types.UID) (records.Facts, string, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	u, ok := m.unrecorded[key]
	if !ok || u.uid != uid {
		return records.Facts{}, "", false
	}
	return u.facts, u.message, true
}

// forgetUnrecorded drops the facts kept of key's release without a record: a record of it
// carries its facts now.
func (m *Memory) forgetUnrecorded(key types.NamespacedName) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.unrecorded, key)
}

// recordPhase keeps the rudder_release_state gauge at one series per CR: the phase its last
// pass ended in.
func (m *Memory) recordPhase(key types.NamespacedName, ph phase) {
	state := string(ph)
	m.mu.Lock()
	defer m.mu.Unlock()
	old, ok := m.states[key]
	if ok && old == state {
		return
	}
	if ok {
		releaseStates.DeleteLabelValues(m.label, key.Namespace, key.Name, old)
	}
	m.states[key] = state
	releaseStates.WithLabelValues(m.label, key.Namespace, key.Name, state).Set(1)
}

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

// MarkDirty asks the next pass of key to check drift.
func (m *Memory) MarkDirty(key types.NamespacedName) { m.mark(key, driftChanged) }

// markMissing asks the next pass of key to check that every operand exists.
func (m *Memory) markMissing(key types.NamespacedName) { m.mark(key, driftMissing) }

func (m *Memory) mark(key types.NamespacedName, d drift) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.dirty[key] |= d
}

// takeDrift reports (and clears) what a pass must check of drift: everything when an operand
// changed or this process has not checked this CR yet, only presence when an operand was not
// seen, nothing (0) otherwise.
func (m *Memory) takeDrift(key types.NamespacedName, uid types.UID) drift {
	m.mu.Lock()
	defer m.mu.Unlock()
	d := m.dirty[key]
	if m.verified[key] != uid {
		d |= driftChanged
	}
	delete(m.dirty, key)
	m.verified[key] = uid
	return d
}

// markVerified records that the objects of key's release (of the CR with uid) are as the
// manifest says (Helm just applied them), without clearing a drift mark an operand event set
// meanwhile.
func (m *Memory) markVerified(key types.NamespacedName, uid types.UID) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.verified[key] = uid
}

// manifestObjects parses a release manifest, into whole objects or only their identities. It
// keeps, per CR, only the identity of the newest revision's objects (apiVersion, kind,
// namespace, name: what readiness and the dependent watches need), not the objects: drift
// re-apply, which needs them whole, reads the revision again.
func (m *Memory) manifestObjects(key types.NamespacedName, rel *release.Release, whole bool,
	mapper meta.RESTMapper) ([]*unstructured.Unstructured, error) {
	parse := helm.ParseIdentities
	if whole {
		parse = helm.ParseManifest
	}
	objs, err := parse(rel.Manifest, rel.Namespace, mapper)
	if err != nil {
		return nil, err
	}
	m.rememberObjects(key, rel.Version, objs)
	return objs, nil
}

// rememberObjects keeps the identities of the objects of key's newest revision, and the keys
// of the labels and annotations each sets (objs are whole, or identities with their metadata).
func (m *Memory) rememberObjects(key types.NamespacedName, revision int, objs []*unstructured.Unstructured) {
	ids := make([]objectID, len(objs))
	for i, o := range objs {
		ids[i] = objectID{apiVersion: o.GetAPIVersion(), kind: o.GetKind(), namespace: o.GetNamespace(), name: o.GetName(),
			metadata: metadataKeys(o.GetLabels(), o.GetAnnotations())}
	}
	m.mu.Lock()
	m.manifests[key] = parsedManifest{revision: revision, objects: ids}
	m.mu.Unlock()
}

// cachedManifest returns the identities of a revision's objects, as objects with nothing else
// set, if this process has them.
func (m *Memory) cachedManifest(key types.NamespacedName, revision int) ([]*unstructured.Unstructured, bool) {
	m.mu.Lock()
	pm, ok := m.manifests[key]
	m.mu.Unlock()
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

// OperandUpdated asks the next pass of key for a drift check when an update of its operand
// (of kind gk) from old to cur may be drift: a change of its spec (its generation), or of
// the metadata its manifest sets (see metadataChanged). Status changes, and metadata other
// controllers keep, only re-evaluate readiness.
func (m *Memory) OperandUpdated(key types.NamespacedName, gk schema.GroupKind, old, cur client.Object) {
	if old.GetGeneration() != cur.GetGeneration() || m.metadataChanged(key, gk, old, cur) {
		m.MarkDirty(key)
	}
}

// metadataChanged reports whether an update of an operand of key (of kind gk) changed
// a label or an annotation that its release's newest manifest sets — what drift re-apply
// restores — or may have: this process does not know that manifest's keys. A change of
// metadata another controller keeps on the object (a Deployment's revision annotation) is no
// drift: re-apply would leave it as it is, so it asks for no reading of the release's objects.
func (m *Memory) metadataChanged(key types.NamespacedName, gk schema.GroupKind, old, cur client.Object) bool {
	changed := changedMetadata(old, cur)
	if len(changed) == 0 {
		return false
	}
	m.mu.Lock()
	pm, ok := m.manifests[key]
	m.mu.Unlock()
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
