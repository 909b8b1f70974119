package watches

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func TestValuesFrom(t *testing.T) {
	t.Parallel()
	ws, err := Parse([]byte(`- group: a.io
  version: v1
  kind: A
  chart: c
  valuesFrom:
  - {kind: Secret, name: "{{ .metadata.name }}-db"}
  - {kind: ConfigMap, name: shared, valuesKey: extra.yaml, optional: true}
  - {kind: Secret, name: "{{ .metadata.name }}-pw", valuesKey: password, targetPath: db.password}
`), "/base", func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	w := ws[0]
	cr := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"db": map[string]any{"host": "from-spec"}}}}
	cr.SetName("x")
	cr.SetNamespace("ns")
	cr.SetGroupVersionKind(w.GroupVersionKind())
	srcs, err := w.SourcesOf(cr)
	if err != nil {
		t.Fatal(err)
	}
	// A name from the CR must be claimed by the source for that CR; a fixed one needs no claim.
	if got := []string{srcs[0].For, srcs[1].For}; !reflect.DeepEqual(got, []string{"A.a.io/x", ""}) {
		t.Fatalf("claims wanted %q", got)
	}
	if !Claims("B.a.io/x, A.a.io/x", "A.a.io/x") || Claims("A.a.io/xy", "A.a.io/x") {
		t.Fatal("Claims reads the annotation wrong")
	}
	if got := []string{srcs[0].Name, srcs[0].Key, srcs[1].Name, srcs[1].Key, srcs[2].Namespace}; !reflect.DeepEqual(got, []string{"x-db", "values.yaml", "shared", "extra.yaml", "ns"}) {
		t.Fatalf("sources %v", got)
	}
	// In order, the later source winning, the spec on top; the optional one missing.
	base, err := MergeSources(srcs, [][]byte{[]byte("db: {host: a, port: 5432, password: old}\nreplicas: 1\n"), nil, []byte("s3cr3t,with comma")})
	if err != nil {
		t.Fatal(err)
	}
	values, _, err := w.Values(cr, base)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"replicas": float64(1), "db": map[string]any{"host": "from-spec", "port": float64(5432), "password": "s3cr3t,with comma"}}
	if !reflect.DeepEqual(values, want) {
		t.Fatalf("values %v, want %v", values, want)
	}

	// A missing source that is not optional names itself; a Secret that is no YAML map never
	// shows its content.
	_, err = MergeSources(srcs, [][]byte{nil, nil, []byte("x")})
	if !errors.Is(err, ErrSourceMissing) || !strings.Contains(err.Error(), "Secret ns/x-db") {
		t.Fatalf("missing: %v", err)
	}
	_, err = MergeSources(srcs[:1], [][]byte{[]byte("- hunter2")})
	if err == nil || strings.Contains(err.Error(), "hunter2") {
		t.Fatalf("a Secret that is no map: %v", err)
	}
	// A name can only be one of the CR's namespace.
	cr.SetName("../kube-system")
	if _, err := w.SourcesOf(cr); err == nil || !strings.Contains(err.Error(), "valuesFrom[0].name") {
		t.Fatalf("a name with a path: %v", err)
	}
}

func TestValuesFromInvalid(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ yaml, want string }{
		{`[{kind: Pod, name: x}]`, "valuesFrom[0].kind"},
		{`[{kind: Secret}]`, "valuesFrom[0].name: required"},
		{`[{kind: Secret, name: "{{ .x"}]`, "valuesFrom[0].name"},
		{`[{kind: Secret, name: x, valuesKey: "a/b"}]`, "valuesFrom[0].valuesKey"},
		{`[{kind: ConfigMap, name: x, targetPath: "a..b"}]`, "valuesFrom[0].targetPath"},
	} {
		_, err := Parse([]byte("- {group: a.io, version: v1, kind: A, chart: c, valuesFrom: "+tc.yaml+"}"), "/base", func(string) (string, bool) { return "", false })
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.yaml, err, tc.want)
		}
	}
}
