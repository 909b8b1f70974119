package helm

import (
	"encoding/json"
	"fmt"
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/util/csaupgrade"
	"k8s.io/utils/lru"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"
)

// A release's fields have one field manager, FieldManager ("helm"), whoever writes them:
// rudder, or a person's helm rollback or upgrade. rudder before abf8a42 (2026-12-06) wrote as
// legacyFieldManager; on an object of a release that applies server-side, what that manager
// holds is moved to FieldManager before rudder applies it (foldLegacy), so that neither
// rudder's apply nor a Helm CLI's conflicts with it, and a field the chart no longer sets is
// released rather than kept by a manager no one applies as any more.

// legacyFieldManager is the field manager rudder wrote as before it wrote as FieldManager:
// its Helm client's, and the user agent's name of its other writes. The code that moves its
// fields (foldLegacy, and its callers kubeClient.foldLegacy and moveLegacyFields) can go
// once every release has been upgraded or checked for drift by abf8a42 or a later rudder:
// the objects then hold none.
const legacyFieldManager = "rudder"

// foldLegacy is the JSON patch that moves the fields legacyFieldManager holds on an object
// (its managedFields, read at resourceVersion) to FieldManager, or nil when it holds none:
// its apply's into FieldManager's apply (their union), and its client-side entries as Helm's
// move of a release to server-side apply moves its own (client-go's csaupgrade). The patch
// also sets resourceVersion, so that it fails with a conflict when the object has changed
// since it was read, as csaupgrade's does.
func foldLegacy(fields []metav1.ManagedFieldsEntry, resourceVersion string) ([]byte, error) {
	if !slices.ContainsFunc(fields, func(e metav1.ManagedFieldsEntry) bool { return e.Manager == legacyFieldManager }) {
		return nil, nil
	}
	folded, err := foldLegacyApply(slices.Clone(fields))
	if err != nil {
		return nil, err
	}
	obj := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{ManagedFields: folded}}
	if err := csaupgrade.UpgradeManagedFields(obj, sets.New(legacyFieldManager), FieldManager); err != nil {
		return nil, err
	}
	return json.Marshal([]map[string]any{
		{"op": "replace", "path": "/metadata/managedFields", "value": obj.ManagedFields},
		{"op": "replace", "path": "/metadata/resourceVersion", "value": resourceVersion},
	})
}

// foldLegacyApply moves legacyFieldManager's apply entries into FieldManager's apply of the
// same subresource: renamed when FieldManager has none, else their field sets joined.
func foldLegacyApply(fields []metav1.ManagedFieldsEntry) ([]metav1.ManagedFieldsEntry, error) {
	isApply := func(manager, subresource string) func(metav1.ManagedFieldsEntry) bool {
		return func(e metav1.ManagedFieldsEntry) bool {
			return e.Manager == manager && e.Operation == metav1.ManagedFieldsOperationApply && e.Subresource == subresource
		}
	}
	for {
		i := slices.IndexFunc(fields, func(e metav1.ManagedFieldsEntry) bool {
			return e.Manager == legacyFieldManager && e.Operation == metav1.ManagedFieldsOperationApply
		})
		if i < 0 {
			return fields, nil
		}
		j := slices.IndexFunc(fields, isApply(FieldManager, fields[i].Subresource))
		if j < 0 {
			fields[i].Manager = FieldManager
			continue
		}
		union, err := unionFields(fields[j], fields[i])
		if err != nil {
			return nil, err
		}
		fields[j].FieldsV1 = union
		fields = slices.Delete(fields, i, i+1)
	}
}

// unionFields is the union of the field sets of a and b, in managedFields' encoding.
func unionFields(a, b metav1.ManagedFieldsEntry) (*metav1.FieldsV1, error) {
	set := func(e metav1.ManagedFieldsEntry) (*fieldpath.Set, error) {
		s := &fieldpath.Set{}
		if e.FieldsV1 == nil {
			return s, nil
		}
		if err := s.FromJSON(e.FieldsV1.GetRawReader()); err != nil {
			return nil, fmt.Errorf("reading the fields of field manager %s: %w", e.Manager, err)
		}
		return s, nil
	}
	sa, err := set(a)
	if err != nil {
		return nil, err
	}
	sb, err := set(b)
	if err != nil {
		return nil, err
	}
	raw, err := sa.Union(sb).ToJSON()
	if err != nil {
		return nil, err
	}
	return metav1.NewFieldsV1(string(raw)), nil
}

// folded remembers, per process, the objects a server-side upgrade or rollback found holding
// nothing of legacyFieldManager's (or moved it from): each is read for it once per process,
// not at every action (kubeClient.foldLegacy, force.go). Only a rudder before this version
// writes as legacyFieldManager, and it never runs beside this process: a rollout of rudder
// back to it and forth again starts a new process, which reads each object again. Past its
// size, an object's next action reads it once more. (k8s.io/utils/lru is safe for
// concurrent use.)
var folded = lru.New(16384)
