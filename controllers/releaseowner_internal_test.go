package controllers

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/rudder-operator/rudder/internal/records"
	"github.com/rudder-operator/rudder/internal/watches"
)

// TestReleaseOwner: a release record maps to the CR whose UID it carries: the CR named like
// the release, or, for a release named by a template, the one the UID index finds; the index
// holds only the latter. A record whose UID no CR has maps to none.
func TestReleaseOwner(t *testing.T) {
	gvk := schema.GroupVersionKind{Group: "test.rudder.dev", Version: "v1", Kind: "Probe"}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "Chart.yaml"), []byte("apiVersion: v2\nname: c\nversion: 0.1.0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cr := func(name, uid string, labels map[string]string) *metav1.PartialObjectMetadata {
		return &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID(uid), Labels: labels}}
	}
	record := func(release, uid string) client.Object {
		return cr("sh.helm.release.v1."+release+".v1", "", map[string]string{"name": release, "owner": "helm", records.LabelOwnerUID: uid})
	}
	for _, c := range []struct {
		name, watch string
		record      client.Object
		want        []string // the CRs mapped to
		indexed     int      // CRs in the UID index
	}{
		{"named after the CR", "", record("a", "u-a"), []string{"a"}, 0},
		{"another CR's UID", "", record("a", "u-b"), nil, 0},
		{"no CR has the UID", "", record("a", "u-gone"), nil, 0},
		{"named by a template", ", releaseName: '{{ .metadata.name }}-x'", record("a-x", "u-a"), []string{"a"}, 2},
	} {
		t.Run(c.name, func(t *testing.T) {
			ws, err := watches.Parse([]byte("- {group: test.rudder.dev, version: v1, kind: Probe, chart: "+dir+c.watch+"}\n"), dir, func(string) (string, bool) { return "", false })
			if err != nil {
				t.Fatal(err)
			}
			r := &Reconciler{gvk: gvk, opts: Options{Watch: ws[0]}, log: logr.Discard()}
			mapper := meta.NewDefaultRESTMapper(nil)
			mapper.Add(gvk, meta.RESTScopeNamespace)
			var objs []client.Object
			for _, n := range []string{"a", "b"} {
				u := CRObject(gvk)
				u.SetNamespace("ns")
				u.SetName(n)
				u.SetUID(types.UID("u-" + n))
				objs = append(objs, u)
			}
			r.opts.Client = fake.NewClientBuilder().WithScheme(runtime.NewScheme()).WithRESTMapper(mapper).
				WithObjects(objs...).WithIndex(CRObject(gvk), uidIndex, watchEvents{r}.indexedUID).Build()

			var got []string
			for _, req := range (watchEvents{r}).releaseOwner(context.Background(), c.record) {
				got = append(got, req.Name)
			}
			if len(got) != len(c.want) || (len(got) == 1 && got[0] != c.want[0]) {
				t.Errorf("mapped to %v; want %v", got, c.want)
			}
			n := 0
			for _, o := range objs {
				n += len(watchEvents{r}.indexedUID(o))
			}
			if n != c.indexed {
				t.Errorf("%d CRs in the UID index; want %d", n, c.indexed)
			}
		})
	}
}
