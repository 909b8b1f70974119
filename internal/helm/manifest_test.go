package helm

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"

	"go.yaml.in/yaml/v2"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	sigsyaml "sigs.k8s.io/yaml"
)

// benchManifest is what the bench chart (internal/bench/testdata/charts/web) renders.
const benchManifest = `---
# Source: web/templates/service.yaml
apiVersion: v1
kind: Service
metadata:
  name: s-0001
  labels: {app.kubernetes.io/name: web, app.kubernetes.io/instance: s-0001}
spec:
  selector: {app.kubernetes.io/name: web, app.kubernetes.io/instance: s-0001}
  ports:
  - {name: http, port: 80, targetPort: http}
---
# Source: web/templates/deployment.yaml
apiVersion: apps/v1
kind: Deployment
metadata:
  name: s-0001
  labels: {app.kubernetes.io/name: web, app.kubernetes.io/instance: s-0001}
spec:
  replicas: 1
  selector:
    matchLabels: {app.kubernetes.io/name: web, app.kubernetes.io/instance: s-0001}
  template:
    metadata:
      labels: {app.kubernetes.io/name: web, app.kubernetes.io/instance: s-0001}
    spec:
      containers:
      - name: web
        image: nginx:1.27.3
        ports:
        - {name: http, containerPort: 8080}
`

func benchRenderer() *postRenderer {
	return &postRenderer{owner: Owner{GVK: schema.GroupVersionKind{Group: "bench.rudder.dev", Version: "v1", Kind: "Scale"},
		Key: types.NamespacedName{Namespace: "scale", Name: "s-0001"}, UID: "u1"},
		conf: Confinement{Namespace: "scale"}, scoper: newScoper(StaticMapper(), nil)}
}

func BenchmarkPostRender(b *testing.B) {
	pr := benchRenderer()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := pr.Run(bytes.NewBufferString(benchManifest)); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkParse parses what the post-renderer made of the bench chart: whole objects, and
// only their identities.
func BenchmarkParse(b *testing.B) {
	out, err := benchRenderer().Run(bytes.NewBufferString(benchManifest))
	if err != nil {
		b.Fatal(err)
	}
	manifest, mapper := out.String(), StaticMapper()
	for _, parse := range []struct {
		name string
		f    func(string, string, meta.RESTMapper) ([]*unstructured.Unstructured, error)
	}{{"manifest", ParseManifest}, {"identities", ParseIdentities}} {
		b.Run(parse.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := parse.f(manifest, "scale", mapper); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// The post-renderer writes objects with yaml.v2 directly; the bytes are those of
// sigs.k8s.io/yaml.Marshal (through JSON), which Helm's own code writes.
func TestPostRenderYAMLAsSigsYAML(t *testing.T) {
	t.Parallel()
	docs := benchManifest + `---
apiVersion: v1
kind: ConfigMap
metadata:
  name: odd
  annotations: {a: "true", b: "1.0", c: "", d: "yes", e: "on", f: "0x1F", g: "1e3", h: "null", i: "~", j: "2024-01-01"}
data:
  multi: |
    line one
    line two: with colon
  quoted: "  spaces  "
  unicode: "é ✓ \t tab"
  colon: "a: b"
  hash: "# not a comment"
  star: "*x"
  dash: "- x"
binaryData: {}
extra:
  ints: [0, -1, 9007199254740993, 1.5, 2.0, 1e3, -0.25, 1e6, -1e6, 1e19, 1e20, 1e21, 0.00001, 123456789.5]
  bools: [true, false]
  nothing: null
  empty: []
  nested: [{a: [1, {b: c}]}, []]
  "1": numeric key
`
	dec := utilyaml.NewYAMLOrJSONDecoder(strings.NewReader(docs), 4096)
	for {
		var raw map[string]any
		if err := dec.Decode(&raw); err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			t.Fatal(err)
		}
		want, err := sigsyaml.Marshal(raw)
		if err != nil {
			t.Fatal(err)
		}
		got, err := yaml.Marshal(jsonNumbers(raw))
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != string(want) {
			t.Errorf("yaml.v2:\n%s\nsigs.k8s.io/yaml:\n%s", got, want)
		}
	}
}

// ParseIdentities finds what ParseManifest finds, and only the identities.
func TestParseIdentities(t *testing.T) {
	t.Parallel()
	manifest := benchManifest + "---\n# Source: only a comment\n---\napiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata: {name: r, namespace: ignored}\n" +
		"---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: c, namespace: other}\ndata: {a: b}\n"
	whole, err := ParseManifest(manifest, "scale", StaticMapper())
	if err != nil {
		t.Fatal(err)
	}
	ids, err := ParseIdentities(manifest, "scale", StaticMapper())
	if err != nil {
		t.Fatal(err)
	}
	if len(ids) != len(whole) || len(ids) != 4 {
		t.Fatalf("%d identities, %d objects", len(ids), len(whole))
	}
	for i, id := range ids {
		w := whole[i]
		if id.GroupVersionKind() != w.GroupVersionKind() || id.GetNamespace() != w.GetNamespace() || id.GetName() != w.GetName() {
			t.Errorf("identity %d: %s, object: %s", i, Describe(id), Describe(w))
		}
		if len(id.Object) != 3 {
			t.Errorf("identity %d holds more than its identity: %v", i, id.Object)
		}
	}
	if _, err := ParseIdentities("apiVersion: v1\nkind: Nope\nmetadata: {name: x}\n", "scale", testMapper()); err == nil {
		t.Error("a kind the mapper does not know was accepted")
	}
}
