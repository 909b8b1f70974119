package render

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"helm.sh/helm/v4/pkg/chart/common"
	chart "helm.sh/helm/v4/pkg/chart/v2"
)

// schemaChart is a chart whose values.schema.json is schema, with the extra files given.
func schemaChart(name, schema string, files map[string]string) *chart.Chart {
	ch := &chart.Chart{Metadata: &chart.Metadata{APIVersion: "v2", Name: name, Version: "0.1.0"}, Schema: []byte(schema)}
	ch.Raw = append(ch.Raw, &common.File{Name: "values.schema.json", Data: []byte(schema)})
	for n, d := range files {
		ch.Raw = append(ch.Raw, &common.File{Name: n, Data: []byte(d)})
		ch.Files = append(ch.Files, &common.File{Name: n, Data: []byte(d)})
	}
	return ch
}

const portDefs = `{"$defs": {"port": {"type": "integer", "minimum": 1, "maximum": 65535}}}`

func TestSchemaRefToASiblingValidates(t *testing.T) {
	for _, ref := range []string{"defs.json#/$defs/port", "./defs.json#/$defs/port", "file:///defs.json#/$defs/port"} {
		// The drafts' meta-schemas are the library's own: naming one fetches nothing.
		ch := schemaChart("web", `{"$schema": "http://json-schema.org/draft-07/schema#", "type": "object", "properties": {"port": {"$ref": "`+ref+`"}}}`,
			map[string]string{"defs.json": portDefs})
		if err := CompileSchemas(ch); err != nil {
			t.Fatalf("%s: %v", ref, err)
		}
		if err := ValidateValues(ch, map[string]any{"port": 8080}); err != nil {
			t.Errorf("%s: port 8080: %v", ref, err)
		}
		err := ValidateValues(ch, map[string]any{"port": 70000})
		if err == nil || !strings.Contains(err.Error(), "values don't meet the specifications of the schema(s) in the following chart(s):\nweb:\n") {
			t.Errorf("%s: port 70000: %v, want Helm's message naming chart web", ref, err)
		}
	}
	// A chart decoded from a release record keeps its files in Files, not Raw.
	ch := schemaChart("web", `{"properties": {"port": {"$ref": "defs.json#/$defs/port"}}}`, map[string]string{"defs.json": portDefs})
	ch.Raw = nil
	if err := ValidateValues(ch, map[string]any{"port": 70000}); err == nil {
		t.Error("a decoded chart's sibling reference: port 70000 accepted")
	}
}

func TestSchemaRefOutsideTheChartIsRefused(t *testing.T) {
	var requests atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		requests.Add(1)
		_, _ = w.Write([]byte(portDefs))
	}))
	defer srv.Close()
	tls := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		requests.Add(1)
		_, _ = w.Write([]byte(portDefs))
	}))
	defer tls.Close()
	for _, ref := range []string{
		"file:///etc/passwd",
		"file:///dev/zero",
		"../../../../etc/hostname",
		"file://host/etc/passwd",
		srv.URL + "/defs.json",
		tls.URL + "/defs.json",
		"http://169.254.169.254/latest/meta-data/",
		"ftp://example.invalid/defs.json",
	} {
		ch := schemaChart("web", `{"properties": {"port": {"$ref": "`+ref+`"}}}`, map[string]string{"defs.json": portDefs})
		err := CompileSchemas(ch)
		if err == nil || !strings.Contains(err.Error(), "chart web: values.schema.json") || !strings.Contains(err.Error(), "resolves only to the chart's own files") {
			t.Errorf("$ref %s: %v, want it refused, naming the chart's schema", ref, err)
		}
		if err := ValidateValues(ch, map[string]any{"port": 80}); err == nil {
			t.Errorf("$ref %s: values validated", ref)
		}
	}
	if n := requests.Load(); n != 0 {
		t.Fatalf("the schema made %d requests", n)
	}
}

func TestSchemaOfASubchartResolvesInItsOwnChart(t *testing.T) {
	parent := schemaChart("app", `{"type": "object"}`, nil)
	sub := schemaChart("db", `{"properties": {"port": {"$ref": "defs.json#/$defs/port"}}}`, map[string]string{"defs.json": portDefs})
	parent.AddDependency(sub)
	if err := CompileSchemas(parent); err != nil {
		t.Fatal(err)
	}
	err := ValidateValues(parent, map[string]any{"db": map[string]any{"port": 0}})
	if err == nil || !strings.Contains(err.Error(), "db:\n") {
		t.Fatalf("the subchart's values: %v, want its schema's refusal", err)
	}
	// The parent's file of the same name is not the subchart's.
	lone := schemaChart("db", `{"properties": {"port": {"$ref": "defs.json#/$defs/port"}}}`, nil)
	parent = schemaChart("app", `{"type": "object"}`, map[string]string{"defs.json": portDefs})
	parent.AddDependency(lone)
	if err := CompileSchemas(parent); err == nil || !strings.Contains(err.Error(), "names no file of chart db") {
		t.Fatalf("a subchart's reference to its parent's file: %v", err)
	}
}
