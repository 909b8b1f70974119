package helm

import (
	"encoding/json"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestFoldLegacy: what the field manager of an earlier rudder holds moves to FieldManager's
// entry of the same operation (its apply joined into the apply, its client-side entries as
// Helm's migration moves them), another manager's entries stay as they are, and an object
// without the legacy manager needs no patch.
func TestFoldLegacy(t *testing.T) {
	entry := func(manager string, op metav1.ManagedFieldsOperationType, apiVersion, fields string) metav1.ManagedFieldsEntry {
		return metav1.ManagedFieldsEntry{Manager: manager, Operation: op, APIVersion: apiVersion, FieldsType: "FieldsV1",
			FieldsV1: metav1.NewFieldsV1(fields)}
	}
	const (
		apply  = metav1.ManagedFieldsOperationApply
		update = metav1.ManagedFieldsOperationUpdate
		image  = `{"f:spec":{"f:image":{}}}`
		labels = `{"f:metadata":{"f:labels":{"f:app":{}}}}`
		both   = `{"f:metadata":{"f:labels":{"f:app":{}}},"f:spec":{"f:image":{}}}`
		team   = `{"f:metadata":{"f:annotations":{"f:team":{}}}}`
	)
	for _, tc := range []struct {
		name string
		in   []metav1.ManagedFieldsEntry
		want []metav1.ManagedFieldsEntry // nil: no patch
	}{
		{name: "nothing of the legacy manager's",
			in: []metav1.ManagedFieldsEntry{entry(FieldManager, apply, "v1", image), entry("someone", update, "v1", team)}},
		{name: "its apply renamed",
			in:   []metav1.ManagedFieldsEntry{entry(legacyFieldManager, apply, "v1", image), entry("someone", update, "v1", team)},
			want: []metav1.ManagedFieldsEntry{entry(FieldManager, apply, "v1", image), entry("someone", update, "v1", team)}},
		{name: "its apply joined into FieldManager's",
			in:   []metav1.ManagedFieldsEntry{entry(FieldManager, apply, "v1", labels), entry(legacyFieldManager, apply, "v1", image)},
			want: []metav1.ManagedFieldsEntry{entry(FieldManager, apply, "v1", both)}},
		{name: "its client-side entry joined into the apply",
			in:   []metav1.ManagedFieldsEntry{entry(FieldManager, apply, "v1", labels), entry(legacyFieldManager, update, "v1", image), entry("someone", update, "v1", team)},
			want: []metav1.ManagedFieldsEntry{entry(FieldManager, apply, "v1", both), entry("someone", update, "v1", team)}},
		{name: "its client-side entry made the apply",
			in:   []metav1.ManagedFieldsEntry{entry(legacyFieldManager, update, "v1", image)},
			want: []metav1.ManagedFieldsEntry{entry(FieldManager, apply, "v1", image)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			patch, err := foldLegacy(tc.in, "42")
			if err != nil {
				t.Fatal(err)
			}
			if tc.want == nil {
				if patch != nil {
					t.Fatalf("patch %s, want none", patch)
				}
				return
			}
			var ops []struct {
				Op, Path string
				Value    json.RawMessage
			}
			if err := json.Unmarshal(patch, &ops); err != nil {
				t.Fatal(err)
			}
			if len(ops) != 2 || ops[0].Path != "/metadata/managedFields" || ops[1].Path != "/metadata/resourceVersion" || string(ops[1].Value) != `"42"` {
				t.Fatalf("patch %s", patch)
			}
			var got []metav1.ManagedFieldsEntry
			if err := json.Unmarshal(ops[0].Value, &got); err != nil {
				t.Fatal(err)
			}
			want, _ := json.Marshal(tc.want)
			if have, _ := json.Marshal(got); string(have) != string(want) {
				t.Fatalf("managedFields\n%s\nwant\n%s", have, want)
			}
		})
	}
}
