package machine

import (
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	rstatus "github.com/rudder-operator/rudder/api/status"
	"github.com/rudder-operator/rudder/internal/release"
)

// reportInventory sets status.inventory to the objects of the deployed revision the pass
// settled on, when it looked at them: a pass that did not (a failure, a pause, a lock) leaves
// the inventory as the last one that did wrote it. A kind whose schema drops the field (a
// CRD made before it) gets none, so that no pass writes what the API server prunes.
func (rp reporter) reportInventory(o *outcome) {
	if !rp.sub.w.Status.KeepsInventory() {
		rp.st.Inventory = nil
		return
	}
	if o.ready == nil || o.head == nil || o.head.Status != release.StatusDeployed {
		return
	}
	rp.st.Inventory = inventoryOf(rp.st.Inventory, o.head.Revision, o.objects)
}

// inventoryOf is the inventory of revision's objects objs: was itself when it lists them
// already, so that an idle pass allocates nothing for it.
func inventoryOf(was *rstatus.Inventory, revision int, objs []*unstructured.Unstructured) *rstatus.Inventory {
	n := min(len(objs), rstatus.InventoryLimit)
	if was != nil && was.Revision == revision && was.Count == len(objs) && was.Truncated == (n < len(objs)) &&
		len(was.Entries) == n && listsAll(was.Entries, objs) {
		return was
	}
	return rstatus.NewInventory(revision, objs)
}

// listsAll reports whether entries name objs, one for one and in order.
func listsAll(entries []rstatus.InventoryEntry, objs []*unstructured.Unstructured) bool {
	for i, e := range entries {
		if e != rstatus.EntryOf(objs[i]) {
			return false
		}
	}
	return true
}
