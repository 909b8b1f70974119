package status

import (
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// InventoryLimit bounds status.inventory.entries: a release of more objects lists the first
// InventoryLimit (in the manifest's order) and says so (Truncated, Count). A CR's status is
// stored with the CR, which etcd bounds at 1.5 MiB; 500 entries stay under 100 KiB.
const InventoryLimit = 500

// Inventory is the objects of a release's deployed revision (Helm's manifest, as the
// watch's post-renderers left it; hooks and crds/ are not part of it), as Flux's
// .status.inventory lists what a Kustomization or HelmRelease manages. `rudder tree` reads it.
type Inventory struct {
	// Revision is the deployed revision the entries are the objects of.
	Revision int `json:"revision"`
	// Count is how many objects the revision has; Entries lists at most InventoryLimit.
	Count int `json:"count"`
	// Truncated: the revision has more objects than Entries lists.
	// +optional
	Truncated bool `json:"truncated,omitempty"`
	// Entries are the objects, in the manifest's order.
	// +listType=atomic
	// +optional
	Entries []InventoryEntry `json:"entries,omitempty"`
}

// InventoryEntry names one object.
type InventoryEntry struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	// Namespace is empty for a cluster-scoped object.
	// +optional
	Namespace string `json:"namespace,omitempty"`
	Name      string `json:"name"`
}

// NewInventory is the inventory of revision's objects objs, in their order, of which it
// lists the first InventoryLimit.
func NewInventory(revision int, objs []*unstructured.Unstructured) *Inventory {
	n := min(len(objs), InventoryLimit)
	inv := &Inventory{Revision: revision, Count: len(objs), Truncated: n < len(objs)}
	if n > 0 {
		inv.Entries = make([]InventoryEntry, n)
	}
	for i, obj := range objs[:n] {
		inv.Entries[i] = EntryOf(obj)
	}
	return inv
}

// EntryOf is the entry that names obj.
func EntryOf(obj *unstructured.Unstructured) InventoryEntry {
	return InventoryEntry{APIVersion: obj.GetAPIVersion(), Kind: obj.GetKind(), Namespace: obj.GetNamespace(), Name: obj.GetName()}
}

// InventoryOf reads status.inventory of a CR held as unstructured (nil: none). Like
// ConditionsOf it reads the fields directly: every pass reads them.
func InventoryOf(obj *unstructured.Unstructured) *Inventory {
	raw, ok, _ := unstructured.NestedFieldNoCopy(obj.Object, "status", "inventory")
	m, _ := raw.(map[string]any)
	if !ok || m == nil {
		return nil
	}
	inv := &Inventory{Revision: intOf(m["revision"]), Count: intOf(m["count"])}
	inv.Truncated, _ = m["truncated"].(bool)
	list, _ := m["entries"].([]any)
	if len(list) > 0 {
		inv.Entries = make([]InventoryEntry, 0, len(list))
	}
	for _, e := range list {
		em, _ := e.(map[string]any)
		var ie InventoryEntry
		ie.APIVersion, _ = em["apiVersion"].(string)
		ie.Kind, _ = em["kind"].(string)
		ie.Namespace, _ = em["namespace"].(string)
		ie.Name, _ = em["name"].(string)
		inv.Entries = append(inv.Entries, ie)
	}
	return inv
}

func intOf(v any) int {
	switch n := v.(type) {
	case int64:
		return int(n)
	case float64:
		return int(n)
	case int:
		return n
	}
	return 0
}
