// Package charts_test renders the built-in charts with their samples' values (and more cases)
// and compares the output with golden files under testdata/. Run with -update to rewrite them.
package charts_test

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"helm.sh/helm/v4/pkg/chart/common"
	commonutil "helm.sh/helm/v4/pkg/chart/common/util"
	chart "helm.sh/helm/v4/pkg/chart/v2"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	"helm.sh/helm/v4/pkg/engine"
	"sigs.k8s.io/yaml"
)

var update = flag.Bool("update", false, "rewrite the golden files")

// spec reads the spec of a sample CR: what rudder turns into values.
func spec(t *testing.T, sample string) map[string]any {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "config", "samples", sample))
	if err != nil {
		t.Fatal(err)
	}
	var cr struct {
		Spec map[string]any `json:"spec"`
	}
	if err := yaml.Unmarshal(b, &cr); err != nil {
		t.Fatal(err)
	}
	return cr.Spec
}

func TestGolden(t *testing.T) {
	cases := []struct {
		name, chart, release string
		values               map[string]any
	}{
		{"nginx-sample", "nginx", "nginxoperator-sample", spec(t, "operator_v1alpha1_nginxoperator.yaml")},
		{"nginx-defaults", "nginx", "web", map[string]any{}},
		{"nginx-force-redeploy", "nginx", "web", map[string]any{"replicas": 5, "forceRedeploy": "2026-11-29"}},
		{"at-sample", "at", "at-sample", spec(t, "cnat_v1alpha1_at.yaml")},
		{"at-quoting", "at", "q", map[string]any{"command": `echo "a b" 'c' $HOME; exit 3`}},
		{"application-sample", "application", "nginx-sample",
			merge(spec(t, "apps_v1_application.yaml"), map[string]any{"labels": map[string]any{"app": "nginx"}})},
		{"application-no-service", "application", "bare", map[string]any{"deployment": map[string]any{
			"selector": map[string]any{"matchLabels": map[string]any{"app": "bare"}},
			"template": map[string]any{"metadata": map[string]any{"labels": map[string]any{"tier": "web"}},
				"spec": map[string]any{"containers": []any{map[string]any{"name": "c", "image": "busybox"}}}},
		}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := render(t, tc.chart, tc.release, tc.values)
			golden := filepath.Join("testdata", tc.name+".golden.yaml")
			if *update {
				if err := os.WriteFile(golden, got, 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run go test ./charts -update)", err)
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("%s differs from the rendering:\n%s", golden, got)
			}
		})
	}
}

func merge(a, b map[string]any) map[string]any {
	for k, v := range b {
		a[k] = v
	}
	return a
}

func render(t *testing.T, chartName, release string, values map[string]any) []byte {
	t.Helper()
	ch, err := loader.Load(chartName)
	if err != nil {
		t.Fatal(err)
	}
	if err := commonutil.ValidateAgainstSchema(ch, mustCoalesce(t, ch, values)); err != nil {
		t.Fatalf("values rejected by values.schema.json: %v", err)
	}
	vals, err := commonutil.ToRenderValues(ch, values, common.ReleaseOptions{Name: release, Namespace: "default", IsInstall: true}, common.DefaultCapabilities)
	if err != nil {
		t.Fatal(err)
	}
	out, err := engine.Render(ch, vals)
	if err != nil {
		t.Fatal(err)
	}
	names := make([]string, 0, len(out))
	for n := range out {
		if strings.HasSuffix(n, ".yaml") && strings.TrimSpace(out[n]) != "" {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	var buf bytes.Buffer
	for _, n := range names {
		buf.WriteString("# " + n + "\n" + strings.TrimSpace(out[n]) + "\n---\n")
		var obj map[string]any
		if err := yaml.Unmarshal([]byte(out[n]), &obj); err != nil {
			t.Fatalf("%s is not valid YAML: %v", n, err)
		}
	}
	return buf.Bytes()
}

func mustCoalesce(t *testing.T, ch *chart.Chart, values map[string]any) map[string]any {
	t.Helper()
	c, err := commonutil.CoalesceValues(ch, values)
	if err != nil {
		t.Fatal(err)
	}
	return c
}
