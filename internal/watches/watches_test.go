package watches

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func env(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

func TestParseErrorsNameEntryAndField(t *testing.T) {
	cases := []struct {
		name, yaml string
		want       string // substring of the error
	}{
		{"unknown field", `- {group: a.io, version: v1, kind: A, chart: c, colour: red}`, "unknown field"},
		{"no chart", `- {group: a.io, version: v1, kind: A}`, "entry 0 (a.io/v1 A): chart: required"},
		{"bad kind", `- {group: a.io, version: v1, kind: lower, chart: c}`, "kind:"},
		{"bad version", `- {group: a.io, version: V1, kind: A, chart: c}`, "version:"},
		{"duplicate", "- {group: a.io, version: v1, kind: A, chart: c}\n- {group: a.io, version: v1, kind: A, chart: d}", "entry 1 (A.a.io/v1): duplicate of entry 0"},
		{"bad template", `- {group: a.io, version: v1, kind: A, chart: c, overrideValues: {x: "{{ .spec"}}`, "overrideValues.x"},
		{"bad release name", `- {group: a.io, version: v1, kind: A, chart: c, releaseName: "{{ nope }}"}`, "releaseName"},
		{"bad selector", `- {group: a.io, version: v1, kind: A, chart: c, selector: {matchExpressions: [{key: a, operator: Foo}]}}`, "selector"},
		{"negative history", `- {group: a.io, version: v1, kind: A, chart: c, maxHistory: -1}`, "maxHistory"},
		{"tiny period", `- {group: a.io, version: v1, kind: A, chart: c, reconcilePeriod: 10ms}`, "reconcilePeriod"},
		{"bad service account", `- {group: a.io, version: v1, kind: A, chart: c, serviceAccountName: "Not_A_Name"}`, `serviceAccountName: "Not_A_Name"`},
		{"negative objects", `- {group: a.io, version: v1, kind: A, chart: c, limits: {maxObjects: -1}}`, "limits.maxObjects"},
		{"zero manifest", `- {group: a.io, version: v1, kind: A, chart: c, limits: {maxManifestBytes: "0"}}`, "limits.maxManifestBytes"},
		{"zero timeout", `- {group: a.io, version: v1, kind: A, chart: c, limits: {actionTimeout: 0s}}`, "limits.actionTimeout"},
		{"unknown limit", `- {group: a.io, version: v1, kind: A, chart: c, limits: {maxCPU: 1}}`, "unknown field"},
		{"bad test onFailure", `- {group: a.io, version: v1, kind: A, chart: c, test: {enable: true, onFailure: retry}}`, `test.onFailure: "retry"`},
		{"test interval without tests", `- {group: a.io, version: v1, kind: A, chart: c, test: {interval: 1h}}`, `test.interval: 1h0m0s runs the tests again, but test.enable is not set`},
		{"test interval too short", `- {group: a.io, version: v1, kind: A, chart: c, test: {enable: true, interval: 10ms}}`, `test.interval: 10ms is under the least interval, 1s`},
		{"zero test timeout", `- {group: a.io, version: v1, kind: A, chart: c, test: {enable: true, timeout: 0s}}`, "test.timeout"},
		{"test timeout over the action's", `- {group: a.io, version: v1, kind: A, chart: c, limits: {actionTimeout: 1m}, test: {enable: true, timeout: 2m}}`, "test.timeout: 2m0s is over the action timeout"},
		{"post-renderer without kustomize", `- {group: a.io, version: v1, kind: A, chart: c, postRenderers: [{}]}`, "postRenderers[0]: kustomize is required"},
		{"unknown post-renderer field", `- {group: a.io, version: v1, kind: A, chart: c, postRenderers: [{kustomize: {patchesStrategicMerge: []}}]}`, "unknown field"},
		{"common metadata on rudder's mark", `- {group: a.io, version: v1, kind: A, chart: c, commonMetadata: {labels: {rudder.dev/managed: "false"}}}`, "commonMetadata.labels"},
		{"broken health check", `- {group: a.io, version: v1, kind: A, chart: c, healthChecks: [{apiVersion: v1, kind: Pod, current: "status.phase =="}]}`,
			"entry 0 (a.io/v1 A): healthChecks[0].current: ERROR: <input>:1:16"},
		{"empty", ``, "no watches"},
	}
	for _, tc := range cases {
		_, err := Parse([]byte(tc.yaml), "/base", env(nil))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want it to contain %q", tc.name, err, tc.want)
		}
	}
}

func TestLimitsReachTheScope(t *testing.T) {
	ws, err := Parse([]byte(`- {group: a.io, version: v1, kind: A, chart: c, allowAggregationLabels: [x/aggregate-to-y],
   limits: {maxObjects: 50, maxManifestBytes: 1Mi, actionTimeout: 30s, maxActionsPerNamespace: 2}}`), "/base", env(nil))
	if err != nil {
		t.Fatal(err)
	}
	cr := &unstructured.Unstructured{}
	cr.SetNamespace("ns")
	cr.SetName("n")
	s := ws[0].Scope(cr, "")
	if s.Limits.MaxObjects != 50 || s.Limits.MaxManifestBytes != 1<<20 || s.Limits.Timeout() != 30*time.Second ||
		s.AllowAggregationLabels[0] != "x/aggregate-to-y" || s.Owner.Key.Name != "n" || ws[0].Limits.ActionsPerNamespace(4) != 2 {
		t.Fatalf("scope %+v, actions per namespace %d", s, ws[0].Limits.ActionsPerNamespace(4))
	}
	if def, _ := Parse([]byte(`- {group: a.io, version: v1, kind: A, chart: c}`), "/base", env(nil)); def[0].Limits.ActionsPerNamespace(4) != 4 ||
		def[0].Scope(cr, "").Limits.Timeout() != 5*time.Minute {
		t.Fatal("defaults: an action slot per worker and Helm's 5m timeout")
	}
}

// TestLayersReachTheRender: post-renderers and common metadata reach the scope the render
// runs with, and change the chart digest a release is made from (so that changing them
// upgrades each release once); a watch without them keeps the chart's own digest.
func TestLayersReachTheRender(t *testing.T) {
	ws, err := Parse([]byte(`- {group: a.io, version: v1, kind: A, chart: c, commonMetadata: {labels: {team: a}},
   postRenderers: [{kustomize: {images: [{name: nginx, newTag: "1.27"}]}}]}
- {group: a.io, version: v1, kind: B, chart: c}
- {group: a.io, version: v1, kind: C, chart: c, commonMetadata: {labels: {team: b}}}`), "/base", env(nil))
	if err != nil {
		t.Fatal(err)
	}
	cr := &unstructured.Unstructured{}
	cr.SetNamespace("ns")
	if p := ws[0].Scope(cr, "").Post; p == nil || p.CommonMetadata.Labels["team"] != "a" || p.PostRenderers[0].Kustomize.Images[0].NewTag != "1.27" {
		t.Fatalf("the scope's post-render spec: %+v", p)
	}
	if ws[1].Scope(cr, "").Post != nil {
		t.Fatal("a watch without layers renders with some")
	}
	const chart = "sha256:0123"
	a, b, c := ws[0].ChartDigest(chart), ws[1].ChartDigest(chart), ws[2].ChartDigest(chart)
	if b != chart || a == chart || c == chart || a == c || !strings.HasPrefix(a, "sha256:") {
		t.Fatalf("chart digests: %s %s %s", a, b, c)
	}
}

func TestParseDefaultsAndTemplates(t *testing.T) {
	ws, err := Parse([]byte(`
- group: a.io
  version: v1
  kind: App
  chart: charts/app
  releaseName: '{{ .metadata.name }}-{{ .metadata.namespace }}'
  overrideValues:
    image.tag: $TAG
    owner: '{{ .metadata.labels.team | default "none" }}'
`), "/base", env(map[string]string{"TAG": "1.2.3"}))
	if err != nil {
		t.Fatal(err)
	}
	w := ws[0]
	if w.ChartPath() != "/base/charts/app" || !w.Policies().WatchesDependents() || !w.Policies().RollsBack() || w.Policies().HistoryLimit() != 10 {
		t.Fatalf("defaults: %s %v %v %d", w.ChartPath(), w.Policies().WatchesDependents(), w.Policies().RollsBack(), w.Policies().HistoryLimit())
	}
	cr := map[string]any{"metadata": map[string]any{"name": "x", "namespace": "ns", "labels": map[string]any{}}}
	ov, err := w.Overrides(cr)
	if err != nil || ov["image.tag"] != "1.2.3" || ov["owner"] != "none" {
		t.Fatalf("overrides %v %v", ov, err)
	}
	if n, err := w.ReleaseNameOf(&unstructured.Unstructured{Object: cr}); err != nil || n != "x-ns" {
		t.Fatalf("release name %q %v", n, err)
	}
}

func TestLoadChecksChartDirectory(t *testing.T) {
	dir := t.TempDir()
	f := filepath.Join(dir, "watches.yaml")
	if err := os.WriteFile(f, []byte("- {group: a.io, version: v1, kind: A, chart: missing}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(f); err == nil || !strings.Contains(err.Error(), "entry 0 (A.a.io/v1): chart") {
		t.Fatalf("got %v", err)
	}
	if err := os.Mkdir(filepath.Join(dir, "missing"), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(f); err != nil {
		t.Fatal(err)
	}
}

func FuzzParse(f *testing.F) {
	f.Add([]byte("- {group: a.io, version: v1, kind: A, chart: c}"))
	f.Add([]byte("- {group: a.io, version: v1, kind: A, chart: c, overrideValues: {a.b: '{{ .spec.x }}'}, releaseName: '{{ .metadata.name }}'}"))
	f.Add([]byte("- {kind: A, version: v1, chart: /abs, selector: {matchLabels: {a: b}}, maxHistory: 3}"))
	f.Fuzz(func(t *testing.T, data []byte) {
		ws, err := Parse(data, "/base", env(nil))
		if err != nil {
			return
		}
		for _, w := range ws {
			if w.ChartPath() == "" || w.GroupVersionKind().Kind == "" || w.LabelSelector() == nil {
				t.Fatalf("accepted an incomplete watch: %+v", w)
			}
			cr := map[string]any{"metadata": map[string]any{"name": "n"}, "spec": map[string]any{}}
			_, _ = w.Overrides(cr) // must not panic
			_, _ = w.ReleaseNameOf(&unstructured.Unstructured{Object: cr})
		}
	})
}

// TestIdentityFields: allowReads, allowServiceAccounts and allowSubjects load as written, and a
// malformed entry is an error naming the field.
func TestIdentityFields(t *testing.T) {
	ok := "- {group: a.io, version: v1, kind: K, chart: c, allowReads: [ConfigMap, Secret/shared-ca, CustomResourceDefinition.apiextensions.k8s.io], " +
		"allowServiceAccounts: [platform, '*'], allowSubjects: [{kind: Group, name: devs}, {kind: ServiceAccount, name: ci, namespace: tools}]}\n"
	if _, err := Parse([]byte(ok), "/base", env(nil)); err != nil {
		t.Fatal(err)
	}
	for entry, field := range map[string]string{
		"allowReads: [Secret/]":                             "allowReads[0]",
		"allowServiceAccounts: [Not_A_Name]":                "allowServiceAccounts[0]",
		"allowSubjects: [{kind: Team, name: x}]":            "allowSubjects[0].kind",
		"allowSubjects: [{kind: ServiceAccount, name: ci}]": "allowSubjects[0].namespace",
		"allowSubjects: [{kind: User}]":                     "allowSubjects[0].name",
		"limits: {maxLookups: -1}":                          "limits.maxLookups",
	} {
		_, err := Parse([]byte("- {group: a.io, version: v1, kind: K, chart: c, "+entry+"}\n"), "/base", env(nil))
		if err == nil || !strings.Contains(err.Error(), field) {
			t.Errorf("%s: got %v, want an error naming %s", entry, err, field)
		}
	}
}
