package machine

import (
	"fmt"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	rstatus "github.com/rudder-operator/rudder/api/status"
)

func identities(n int) []*unstructured.Unstructured {
	objs := make([]*unstructured.Unstructured, n)
	for i := range objs {
		objs[i] = &unstructured.Unstructured{}
		objs[i].SetAPIVersion("v1")
		objs[i].SetKind("ConfigMap")
		objs[i].SetNamespace("demo")
		objs[i].SetName(fmt.Sprintf("cm-%d", i))
	}
	return objs
}

// An unchanged inventory is the one the status holds (an idle pass allocates none); a new
// revision, an object more or one renamed make a new one.
// Not parallel: AllocsPerRun.
func TestInventoryOfReusesAnUnchangedOne(t *testing.T) {
	objs := identities(3)
	was := inventoryOf(nil, 2, objs)
	if was.Revision != 2 || was.Count != 3 || was.Truncated || len(was.Entries) != 3 || was.Entries[2].Name != "cm-2" {
		t.Fatalf("inventory %+v", was)
	}
	if got := inventoryOf(was, 2, objs); got != was {
		t.Fatal("an unchanged inventory was made anew")
	}
	if n := testing.AllocsPerRun(100, func() { inventoryOf(was, 2, objs) }); n != 0 {
		t.Fatalf("%v allocations for an unchanged inventory, want 0", n)
	}
	renamed := identities(3)
	renamed[1].SetName("other")
	for what, got := range map[string]*rstatus.Inventory{
		"a new revision": inventoryOf(was, 3, objs), "one object more": inventoryOf(was, 2, identities(4)),
		"an object renamed": inventoryOf(was, 2, renamed),
	} {
		if got == was {
			t.Errorf("%s: the old inventory was kept", what)
		}
	}
	if got := inventoryOf(was, 2, nil); got.Count != 0 || got.Entries != nil {
		t.Errorf("inventory of no objects: %+v", got)
	}
}

// A release of more objects than InventoryLimit lists the first InventoryLimit and says so.
func TestInventoryOfIsBounded(t *testing.T) {
	t.Parallel()
	objs := identities(rstatus.InventoryLimit + 20)
	inv := inventoryOf(nil, 1, objs)
	if !inv.Truncated || inv.Count != len(objs) || len(inv.Entries) != rstatus.InventoryLimit ||
		inv.Entries[rstatus.InventoryLimit-1].Name != fmt.Sprintf("cm-%d", rstatus.InventoryLimit-1) {
		t.Fatalf("truncated %t, count %d, %d entries", inv.Truncated, inv.Count, len(inv.Entries))
	}
	if inventoryOf(inv, 1, objs) != inv {
		t.Error("an unchanged truncated inventory was made anew")
	}
}

// A rollback-to value is a revision, alone or with what makes it a request of its own.
func TestRollbackRevision(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 12, 7, 13, 0, 0, 5, time.FixedZone("CET", 3600))
	v := RollbackValue(3, at)
	if v != "3@2026-12-07T12:00:00.000000005Z" {
		t.Fatalf("RollbackValue = %q", v)
	}
	for in, want := range map[string]int{v: 3, "7": 7, " 2 ": 2, "4@anything": 4} {
		if got, err := RollbackRevision(in); err != nil || got != want {
			t.Errorf("RollbackRevision(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "x", "@3", "three@now"} {
		if _, err := RollbackRevision(in); err == nil {
			t.Errorf("RollbackRevision(%q): no error", in)
		}
	}
}
