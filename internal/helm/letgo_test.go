package helm

import (
	"strings"
	"testing"
)

// rewriteManifest with unmark takes rudder's marks and the CR's owner reference off each object of a
// stored manifest, keeping Helm's "# Source:" comments, other owners and everything else.
func TestUnmarkManifest(t *testing.T) {
	manifest := `---
# Source: widget/templates/all.yaml
apiVersion: v1
kind: ConfigMap
metadata:
  name: w
  labels: {app: w, rudder.dev/managed: "true"}
  annotations: {rudder.dev/owner: test.rudder.dev/Widget/ns/w}
  ownerReferences:
  - {apiVersion: test.rudder.dev/v1, kind: Widget, name: w, uid: cr-uid}
  - {apiVersion: v1, kind: ConfigMap, name: other, uid: other-uid}
data: {message: hi}
---
# Source: widget/templates/svc.yaml
apiVersion: v1
kind: Service
metadata:
  name: w
  labels: {rudder.dev/managed: "true"}
  annotations: {rudder.dev/owner: test.rudder.dev/Widget/ns/w}
  ownerReferences: [{apiVersion: test.rudder.dev/v1, kind: Widget, name: w, uid: cr-uid}]
`
	got, err := rewriteManifest(manifest, func(obj map[string]any) bool { return unmark(obj, "cr-uid") })
	if err != nil {
		t.Fatal(err)
	}
	for _, gone := range []string{"rudder.dev/", "cr-uid"} {
		if strings.Contains(got, gone) {
			t.Errorf("%q is still in:\n%s", gone, got)
		}
	}
	for _, kept := range []string{"# Source: widget/templates/all.yaml\n", "# Source: widget/templates/svc.yaml\n", "other-uid", "app: w", "message: hi"} {
		if !strings.Contains(got, kept) {
			t.Errorf("%q is gone from:\n%s", kept, got)
		}
	}
	if strings.Count(got, "---\n") != 2 || strings.Contains(got, "labels: {}") || strings.Contains(got, "ownerReferences: []") {
		t.Errorf("documents or empty fields:\n%s", got)
	}
	objs, err := ParseIdentities(got, "ns", StaticMapper())
	if err != nil || len(objs) != 2 {
		t.Fatalf("the manifest does not parse as two objects: %v, %d", err, len(objs))
	}
}
