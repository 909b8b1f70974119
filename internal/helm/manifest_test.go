package helm

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"reflect"
	"strings"
	"testing"

	"github.com/rudder-operator/rudder/internal/guard/guardtest"

	"github.com/rudder-operator/rudder/internal/guard"

	"go.yaml.in/yaml/v2"
	"helm.sh/helm/v4/pkg/kube"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/rest"
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
	return &postRenderer{owner: guard.Owner{GVK: schema.GroupVersionKind{Group: "bench.rudder.dev", Version: "v1", Kind: "Scale"},
		Key: types.NamespacedName{Namespace: "scale", Name: "s-0001"}, UID: "u1"},
		conf: guard.Confinement{Namespace: "scale"}, scoper: guard.NewScoper(StaticMapper(), nil)}
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

// awkwardManifest is the bench manifest and an object of values that are easy to get wrong.
const awkwardManifest = benchManifest + `---
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

// The post-renderer writes objects with yaml.v2 directly; the bytes are those of
// sigs.k8s.io/yaml.Marshal (through JSON), which Helm's own code writes.
func TestPostRenderYAMLAsSigsYAML(t *testing.T) {
	t.Parallel()
	for _, doc := range documents(t, awkwardManifest) {
		obj, err := guard.DecodeObject(doc)
		if err != nil {
			t.Fatal(err)
		}
		want, err := sigsyaml.Marshal(obj)
		if err != nil {
			t.Fatal(err)
		}
		got, err := yaml.Marshal(obj)
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != string(want) {
			t.Errorf("yaml.v2:\n%s\nsigs.k8s.io/yaml:\n%s", got, want)
		}
	}
}

// The post-renderer reads a document as sigs.k8s.io/yaml does (with whole numbers as
// integers), refuses what it refuses, and keeps big integers exact.
func TestDecodeObjectAsSigsYAML(t *testing.T) {
	t.Parallel()
	docs := documents(t, awkwardManifest+`---
base: &base {a: 1, b: [x, y]}
derived: {<<: *base, c: 2.5}
alias: *base
1: int key
true: bool key
2.5: float key
0x10: hex key
when: 2024-01-01T10:00:00Z
date: 2024-01-01
tagged: !!timestamp 2001-12-14
taggedTime: !!timestamp 2001-12-14T21:59:43.10-05:00
bin: !!binary aGVsbG8=
str: !!str 123
octal: 0o17
old: 017
---
# Source: only a comment
---
`)
	for _, doc := range docs {
		got, err := guard.DecodeObject(doc)
		if err != nil {
			t.Fatalf("%v\n%s", err, doc)
		}
		var want map[string]any
		if err := sigsyaml.Unmarshal(doc, &want); err != nil {
			t.Fatal(err)
		}
		if len(want) == 0 {
			if got != nil {
				t.Errorf("an empty document gave %v", got)
			}
			continue
		}
		wholeInts(want)
		if extra, ok := want["extra"].(map[string]any); ok {
			// JSON's float64 rounds 2^53+1; the post-renderer keeps it.
			ints := extra["ints"].([]any)
			if ints[2] != int64(9007199254740992) {
				t.Fatalf("sigs.k8s.io/yaml kept 2^53+1: %v", ints[2])
			}
			ints[2] = int64(9007199254740993)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("decoded\n%#v\nsigs.k8s.io/yaml:\n%#v", got, want)
		}
	}
	for _, bad := range []string{"- a list\n", "just text\n", "a: .inf\n", "a: [.nan]\n", "~: null key\n", "a: [b\n"} {
		_, err := guard.DecodeObject([]byte(bad))
		var m map[string]any
		if err == nil || sigsyaml.Unmarshal([]byte(bad), &m) == nil {
			t.Errorf("%q: decoded with error %v; sigs.k8s.io/yaml refuses it too: want both to", bad, err)
		}
	}
}

// documents splits a manifest as the post-renderer does.
func documents(t *testing.T, manifest string) [][]byte {
	t.Helper()
	r := utilyaml.NewYAMLReader(bufio.NewReader(strings.NewReader(manifest)))
	var docs [][]byte
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return docs
		}
		if err != nil {
			t.Fatal(err)
		}
		docs = append(docs, doc)
	}
}

// wholeInts makes whole float64s int64, in place, as the post-renderer reads them.
func wholeInts(v any) any {
	switch t := v.(type) {
	case map[string]any:
		for k, e := range t {
			t[k] = wholeInts(e)
		}
	case []any:
		for i, e := range t {
			t[i] = wholeInts(e)
		}
	case float64:
		switch {
		case t != math.Trunc(t):
		case t >= math.MinInt64 && t < math.MaxInt64:
			return int64(t)
		case t >= 0 && t < math.MaxUint64:
			return uint64(t)
		}
	}
	return v
}

// ParseIdentities finds what ParseManifest finds, and only the identities with their labels and
// annotations.
func TestParseIdentities(t *testing.T) {
	t.Parallel()
	manifest := benchManifest + "---\n# Source: only a comment\n---\napiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata: {name: r, namespace: ignored}\n" +
		"---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: c, namespace: other, annotations: {a: \"1\", b: x}}\ndata: {a: b}\n"
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
		if !maps.Equal(id.GetLabels(), w.GetLabels()) || !maps.Equal(id.GetAnnotations(), w.GetAnnotations()) {
			t.Errorf("identity %d: labels %v, annotations %v; object: %v, %v", i, id.GetLabels(), id.GetAnnotations(), w.GetLabels(), w.GetAnnotations())
		}
		md, _, _ := unstructured.NestedMap(id.Object, "metadata")
		delete(md, "name")
		delete(md, "namespace")
		delete(md, "labels")
		delete(md, "annotations")
		if len(id.Object) != 3 || len(md) > 0 {
			t.Errorf("identity %d holds more than its identity and metadata: %v", i, id.Object)
		}
	}
	if _, err := ParseIdentities("apiVersion: v1\nkind: Nope\nmetadata: {name: x}\n", "scale", guardtest.Mapper()); err == nil {
		t.Error("a kind the mapper does not know was accepted")
	}
}

// awkwardPostRendered is a post-renderer that may render a ClusterRole, and the manifest Helm
// stores of what it made of awkwardManifest and one: each document after a "# Source" line.
func awkwardPostRendered(t *testing.T) (*postRenderer, string) {
	pr := benchRenderer()
	pr.conf.AllowClusterScoped = []string{"ClusterRole"}
	out, err := pr.Run(bytes.NewBufferString(awkwardManifest +
		"---\napiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata: {name: r}\n"))
	if err != nil {
		t.Fatal(err)
	}
	var manifest strings.Builder
	for doc := range strings.SplitSeq(strings.TrimPrefix(out.String(), "---\n"), "---\n") {
		fmt.Fprintf(&manifest, "---\n# Source: web/templates/all.yaml\n%s\n", doc)
	}
	return pr, manifest.String()
}

// Helm's Build of the manifest Helm assembles from what the post-renderer wrote takes the
// post-renderer's objects, and finds exactly what Helm's own Build finds in the text: the same
// objects, names, namespaces, mappings and request URLs; any other manifest is read as it is.
func TestBuildTakesThePostRenderedObjects(t *testing.T) {
	t.Parallel()
	pr, manifest := awkwardPostRendered(t)
	getter := &restClientGetter{cfg: &rest.Config{Host: "https://127.0.0.1:1"}, namespace: "scale", mapper: StaticMapper()}
	kc := kube.New(getter)
	k := &kubeClient{Client: kc, getter: getter, post: pr}
	if _, ok := k.infos(manifest); !ok {
		t.Fatal("the post-rendered manifest is parsed again")
	}
	for _, in := range []string{manifest, manifest, manifest + "---\napiVersion: v1\nkind: Secret\nmetadata: {name: extra}\n"} {
		want, err := kc.Build(strings.NewReader(in), false)
		if err != nil {
			t.Fatal(err)
		}
		got, err := k.Build(strings.NewReader(in), false)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != len(want) || len(want) < 4 {
			t.Fatalf("%d objects, want %d", len(got), len(want))
		}
		for i, w := range want {
			g := got[i]
			if g.Name != w.Name || g.Namespace != w.Namespace || g.ResourceVersion != w.ResourceVersion ||
				!reflect.DeepEqual(g.Mapping, w.Mapping) || !equality.Semantic.DeepEqual(g.Object, w.Object) {
				t.Errorf("object %d: %s/%s %v\n%#v\nwant %s/%s %v\n%#v", i, g.Namespace, g.Name, g.Mapping.Resource, g.Object,
					w.Namespace, w.Name, w.Mapping.Resource, w.Object)
			}
			gu := g.Client.Get().NamespaceIfScoped(g.Namespace, g.Namespaced()).Resource(g.Mapping.Resource.Resource).Name(g.Name).URL()
			wu := w.Client.Get().NamespaceIfScoped(w.Namespace, w.Namespaced()).Resource(w.Mapping.Resource.Resource).Name(w.Name).URL()
			if gu.String() != wu.String() {
				t.Errorf("object %d is read at %s, want %s", i, gu, wu)
			}
		}
		// What Helm does to the objects it was given (its labels and annotations) does not
		// reach the post-renderer's: the next Build finds them as they were.
		for _, g := range got {
			g.Object.(*unstructured.Unstructured).SetLabels(map[string]string{"changed": "yes"})
		}
	}
	for _, other := range []string{
		strings.Replace(manifest, "name: r\n", "name: r2\n", 1), // a document it did not write
		manifest + "---\n# only a comment\n",
	} {
		if _, ok := k.infos(other); ok {
			t.Errorf("objects given for a manifest the post-renderer did not write:\n%s", other)
		}
	}
}

// The post-renderer knows the identities of what it wrote, as ParseIdentities finds them in its
// output: placed in the release's namespace, or in none when cluster-scoped.
func TestPostRenderIdentities(t *testing.T) {
	t.Parallel()
	pr := benchRenderer()
	pr.conf.AllowedNamespaces, pr.conf.AllowClusterScoped = []string{"other"}, []string{"ClusterRole"}
	out, err := pr.Run(bytes.NewBufferString(awkwardManifest +
		"---\napiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata: {name: r, namespace: ignored}\n" +
		"---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: c, namespace: other}\n"))
	if err != nil {
		t.Fatal(err)
	}
	want, err := ParseIdentities(out.String(), "scale", StaticMapper())
	if err != nil {
		t.Fatal(err)
	}
	got := pr.made()
	if len(got) != len(want) || len(want) != 5 {
		t.Fatalf("%d identities, ParseIdentities finds %d", len(got), len(want))
	}
	for i := range want {
		if !reflect.DeepEqual(got[i].Object, want[i].Object) {
			t.Errorf("identity %d: %v, ParseIdentities: %v", i, got[i].Object, want[i].Object)
		}
	}
}
