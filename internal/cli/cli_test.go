package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"
)

func TestUnknownSubcommandListsTheKnownOnes(t *testing.T) {
	var out, errOut bytes.Buffer
	if code := Run(context.Background(), []string{"scafold"}, Env{Stdout: &out, Stderr: &errOut}); code != 2 {
		t.Fatalf("exit %d", code)
	}
	for _, want := range []string{`unknown subcommand "scafold"`, "lint", "run", "scaffold", "template"} {
		if !strings.Contains(errOut.String(), want) {
			t.Errorf("%q does not contain %q", errOut.String(), want)
		}
	}
}

func schemaJSON(t *testing.T, s apiextensionsv1.JSONSchemaProps) string {
	t.Helper()
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestFromJSONSchema(t *testing.T) {
	tests := []struct {
		name, in string
		// want are substrings of the structural schema's JSON; notes, of the notes.
		want  []string
		notes string
	}{
		{"typed leaves", `{"type":"object","additionalProperties":false,"properties":{"port":{"type":"integer","minimum":1,"maximum":65535},"name":{"type":"string","pattern":"^a","format":"madeup"}}}`,
			[]string{`"port":{"type":"integer","maximum":65535,"minimum":1}`, `"name":{"type":"string","pattern":"^a"}`}, ""},
		{"open unless closed", `{"type":"object","properties":{"a":{"type":"string"}}}`, []string{`"x-kubernetes-preserve-unknown-fields":true`}, ""},
		{"nullable", `{"type":"object","properties":{"a":{"type":["string","null"]}}}`, []string{`"a":{"type":"string","nullable":true}`}, ""},
		{"oneOf is left open", `{"type":"object","properties":{"a":{"oneOf":[{"type":"string"},{"type":"integer"}]}}}`,
			[]string{`"a":{"x-kubernetes-preserve-unknown-fields":true}`}, "spec.a: oneOf has no structural form"},
		{"array without items", `{"type":"object","properties":{"a":{"type":"array"}}}`, []string{`"a":{"type":"array","items":{"x-kubernetes-preserve-unknown-fields":true}}`}, ""},
		{"map of strings", `{"type":"object","properties":{"labels":{"type":"object","additionalProperties":{"type":"string"}}}}`,
			[]string{`"labels":{"type":"object","additionalProperties":{"type":"string"}}`}, ""},
		{"required only if listed", `{"type":"object","additionalProperties":false,"required":["a","zz"],"properties":{"a":{"type":"string"}}}`, []string{`"required":["a"]`}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var in map[string]any
			if err := json.Unmarshal([]byte(tt.in), &in); err != nil {
				t.Fatal(err)
			}
			var notes []string
			got := schemaJSON(t, fromJSONSchema(in, "spec", &notes))
			for _, w := range tt.want {
				if !strings.Contains(got, w) {
					t.Errorf("%s\ndoes not contain %s", got, w)
				}
			}
			if tt.notes != "" && !strings.Contains(strings.Join(notes, "\n"), tt.notes) {
				t.Errorf("notes %v lack %q", notes, tt.notes)
			}
		})
	}
}

func TestInferSchema(t *testing.T) {
	var values map[string]any
	if err := yaml.Unmarshal([]byte("replicas: 1\nratio: 0.5\nname: web\nenabled: true\nempty: {}\nlist: []\nports: [80, 443]\nnothing: null\nimage: {tag: '1.0'}\n"+
		"plugins: [{name: a, args: {thresholds: {cpu: 20}}}, {name: b, args: {mode: fast}, weight: 2}, {name: c, args: [1]}]\n"+
		"profiles: [{args: {thresholds: {cpu: 20}}}, {args: {mode: fast}}]\n"), &values); err != nil {
		t.Fatal(err)
	}
	got := schemaJSON(t, inferSchema(values))
	for _, w := range []string{
		`"replicas":{"description":"Default: 1.","type":"integer"}`,
		`"ratio":{"description":"Default: 0.5.","type":"number"}`,
		`"enabled":{"description":"Default: true.","type":"boolean"}`,
		`"empty":{"type":"object","x-kubernetes-preserve-unknown-fields":true}`,
		`"list":{"type":"array","items":{"x-kubernetes-preserve-unknown-fields":true}}`,
		`"ports":{"type":"array","items":{"type":"integer"}}`,
		`"nothing":{"nullable":true,"x-kubernetes-preserve-unknown-fields":true}`,
		`"image":{"type":"object","properties":{"tag":{"description":"Default: \"1.0\".","type":"string"}}}`,
		// Every element's fields, merged; args differs in type between elements, so stays open.
		`"profiles":{"type":"array","items":{"type":"object","properties":{"args":{"type":"object","properties":{"mode":{"description":"Default: \"fast\".","type":"string"},"thresholds":{"type":"object","properties":{"cpu":{"description":"Default: 20.","type":"integer"}}}}}}}}`,
		`"plugins":{"type":"array","items":{"type":"object","properties":{"args":{"x-kubernetes-preserve-unknown-fields":true},"name":{"type":"string"},"weight":{"description":"Default: 2.","type":"integer"}}}}`,
	} {
		if !strings.Contains(got, w) {
			t.Errorf("%s\ndoes not contain %s", got, w)
		}
	}
}

func TestScaffoldRefuses(t *testing.T) {
	dir := t.TempDir()
	chart := filepath.Join(dir, "c")
	if err := os.MkdirAll(filepath.Join(chart, "templates"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(chart, "Chart.yaml"), []byte("apiVersion: v2\nname: c\nversion: 0.1.0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	full := filepath.Join(dir, "full")
	if err := os.MkdirAll(full, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(full, "x"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--chart", filepath.Join(dir, "none"), "--group", "a.example.com", "--kind", "A", "--output", filepath.Join(dir, "o1")}, "does not load"},
		{[]string{"--chart", chart, "--group", "nodot", "--kind", "A", "--output", filepath.Join(dir, "o2")}, `--group "nodot"`},
		{[]string{"--chart", chart, "--group", "a.example.com", "--kind", "lower", "--output", filepath.Join(dir, "o3")}, `--kind "lower"`},
		{[]string{"--chart", chart, "--group", "a.example.com", "--kind", "A", "--version", "one", "--output", filepath.Join(dir, "o4")}, `--version "one"`},
		{[]string{"--chart", chart, "--group", "a.example.com", "--kind", "A", "--output", full}, "not empty; use --force"},
	} {
		var out, errOut bytes.Buffer
		code := Run(context.Background(), append([]string{"scaffold"}, tc.args...), Env{Stdout: &out, Stderr: &errOut})
		if code != 1 || !strings.Contains(errOut.String(), tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want 1 and %q", tc.args, code, errOut.String(), tc.want)
		}
	}
}

// TestTemplateOfARecursiveRenderFails: `rudder template` of a CR whose value feeds tpl to
// itself used to die of a stack overflow; the render is stopped at its bound and the command
// fails with a message naming it.
func TestTemplateOfARecursiveRenderFails(t *testing.T) {
	dir := t.TempDir()
	files := map[string]string{
		"chart/Chart.yaml":           "apiVersion: v2\nname: rec\nversion: 0.1.0\n",
		"chart/values.yaml":          "extraManifest: \"\"\n",
		"chart/templates/extra.yaml": "{{ tpl .Values.extraManifest . }}\n",
		"watches.yaml":               "- {group: test.rudder.dev, version: v1, kind: Rec, chart: chart}\n",
		"cr.yaml":                    "apiVersion: test.rudder.dev/v1\nkind: Rec\nmetadata: {name: r, namespace: ns}\nspec:\n  extraManifest: '{{ tpl .Values.extraManifest . }}'\n",
	}
	writeFiles(t, dir, files)
	var out, errOut bytes.Buffer
	code := Run(context.Background(), []string{"template", "--watches-file", filepath.Join(dir, "watches.yaml"), filepath.Join(dir, "cr.yaml")},
		Env{Stdout: &out, Stderr: &errOut})
	if code == 0 || !strings.Contains(errOut.String(), "renderMemory") {
		t.Fatalf("exit %d, stderr %q: want a failure naming the renderMemory limit", code, errOut.String())
	}
}

// rudder template renders offline with the valuesFrom sources read from --values-from DIR
// (DIR/<kind>/<name>/<key>), the spec on top; without them, it names the missing source; lint
// renders without the sources it is not given.
func TestTemplateValuesFrom(t *testing.T) {
	dir := t.TempDir()
	files := map[string]string{
		"chart/Chart.yaml":                "apiVersion: v2\nname: vf\nversion: 0.1.0\n",
		"chart/values.yaml":               "message: default\npassword: none\n",
		"chart/templates/cm.yaml":         "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\ndata: {message: {{ .Values.message | quote }}, password: {{ .Values.password | quote }}, size: {{ .Values.size | quote }}}\n",
		"watches.yaml":                    "- {group: test.rudder.dev, version: v1, kind: VF, chart: chart, valuesFrom: [{kind: ConfigMap, name: '{{ .metadata.name }}-cfg'}, {kind: Secret, name: pw, valuesKey: pw, targetPath: password}]}\n",
		"cr.yaml":                         "apiVersion: test.rudder.dev/v1\nkind: VF\nmetadata: {name: r, namespace: ns}\nspec: {size: large}\n",
		"src/ConfigMap/r-cfg/values.yaml": "message: from-the-configmap\nsize: small\n",
		"src/Secret/pw/pw":                "s3cr3t",
	}
	writeFiles(t, dir, files)
	wf, cr := filepath.Join(dir, "watches.yaml"), filepath.Join(dir, "cr.yaml")
	code, out, errOut := runCLI("template", "--watches-file", wf, "--values-from", filepath.Join(dir, "src"), cr)
	if code != 0 || !strings.Contains(out, "message: from-the-configmap") || !strings.Contains(out, "password: s3cr3t") || !strings.Contains(out, "size: large") {
		t.Fatalf("exit %d, stderr %q, out:\n%s", code, errOut, out)
	}
	code, _, errOut = runCLI("template", "--watches-file", wf, cr)
	if code == 0 || !strings.Contains(errOut, "ConfigMap ns/r-cfg") || !strings.Contains(errOut, "--values-from") {
		t.Fatalf("without the sources: exit %d, stderr %q", code, errOut)
	}
	if code, out, _ = runCLI("lint", "--watches-file", wf, cr); strings.Contains(out, "r-cfg") {
		t.Fatalf("lint without the sources: exit %d:\n%s", code, out)
	}
}

// rudder template prints the CRDs of crds/ an install applies, where the watch allows them;
// crds.install Skip prints none, and a watch that does not allow them fails as the install
// would.
func TestTemplateCRDs(t *testing.T) {
	dir := t.TempDir()
	files := map[string]string{
		"chart/Chart.yaml":        "apiVersion: v2\nname: gears\nversion: 0.1.0\n",
		"chart/crds/gear.yaml":    "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata: {name: gears.example.com}\nspec: {group: example.com, names: {kind: Gear, plural: gears}, scope: Namespaced, versions: [{name: v1, served: true, storage: true}]}\n",
		"chart/templates/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n",
		"allowed.yaml":            "- {group: test.rudder.dev, version: v1, kind: G, chart: chart, allowClusterScoped: [CustomResourceDefinition]}\n",
		"skipped.yaml":            "- {group: test.rudder.dev, version: v1, kind: G, chart: chart, crds: {install: Skip}}\n",
		"refused.yaml":            "- {group: test.rudder.dev, version: v1, kind: G, chart: chart}\n",
		"cr.yaml":                 "apiVersion: test.rudder.dev/v1\nkind: G\nmetadata: {name: r, namespace: ns}\n",
	}
	writeFiles(t, dir, files)
	run := func(watchesFile string) (int, string, string) {
		return runCLI("template", "--watches-file", filepath.Join(dir, watchesFile), filepath.Join(dir, "cr.yaml"))
	}
	if code, out, errOut := run("allowed.yaml"); code != 0 || !strings.Contains(out, "# Source: gears/crds/gear.yaml (crds.install: Create)") || !strings.Contains(out, "name: gears.example.com") {
		t.Fatalf("allowed: exit %d, stderr %q, out:\n%s", code, errOut, out)
	}
	if code, out, errOut := run("skipped.yaml"); code != 0 || strings.Contains(out, "gears.example.com") {
		t.Fatalf("crds.install Skip: exit %d, stderr %q, out:\n%s", code, errOut, out)
	}
	if code, _, errOut := run("refused.yaml"); code == 0 || !strings.Contains(errOut, "CustomResourceDefinition") {
		t.Fatalf("not allowed: exit %d, stderr %q", code, errOut)
	}
}

// writeFiles writes files (a path relative to dir → its content) under dir.
func writeFiles(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// rudder lint: a chart with crds/ on a watch that does not allow them fails (the install
// would); a crds policy for a chart without crds/ is a warning; crds.install Skip is fine.
func TestLintCRDPolicy(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{
		"gears/Chart.yaml":         "apiVersion: v2\nname: gears\nversion: 0.1.0\n",
		"gears/values.schema.json": "{}\n",
		"gears/crds/gear.yaml":     "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata: {name: gears.example.com}\nspec: {group: example.com, names: {kind: Gear, plural: gears}, scope: Namespaced, versions: [{name: v1, served: true, storage: true}]}\n",
		"gears/templates/cm.yaml":  "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n",
		"plain/Chart.yaml":         "apiVersion: v2\nname: plain\nversion: 0.1.0\n",
		"plain/values.schema.json": "{}\n",
		"plain/templates/cm.yaml":  "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n",
		"refused.yaml":             "- {group: t.io, version: v1, kind: G, chart: gears}\n",
		"skipped.yaml":             "- {group: t.io, version: v1, kind: G, chart: gears, crds: {install: Skip}}\n",
		"pointless.yaml":           "- {group: t.io, version: v1, kind: P, chart: plain, crds: {install: Skip}}\n",
	})
	lint := func(file string) (int, string) {
		var out, errOut bytes.Buffer
		code := Run(context.Background(), []string{"lint", "--watches-file", filepath.Join(dir, file)}, Env{Stdout: &out, Stderr: &errOut})
		return code, out.String()
	}
	if code, out := lint("refused.yaml"); code == 0 || !strings.Contains(out, "error: G.t.io/v1: the chart has crds/") {
		t.Errorf("refused: exit %d:\n%s", code, out)
	}
	if code, out := lint("skipped.yaml"); code != 0 || strings.Contains(out, "crds") {
		t.Errorf("skipped: exit %d:\n%s", code, out)
	}
	if code, out := lint("pointless.yaml"); code != 0 || !strings.Contains(out, "warning: P.t.io/v1: crds: the chart has no crds/") {
		t.Errorf("pointless: exit %d:\n%s", code, out)
	}
}

// rudder template and lint apply the watch's post-renderers and common metadata, hooks
// included; a patch that does not apply fails both, naming the patch and its target.
func TestTemplateAppliesPostRenderers(t *testing.T) {
	dir := t.TempDir()
	watch := "- group: test.rudder.dev\n  version: v1\n  kind: Layered\n  chart: chart\n" +
		"  commonMetadata: {labels: {team: platform}}\n" +
		"  postRenderers:\n  - kustomize:\n      patches:\n      - target: {kind: ConfigMap}\n        patch: '[{\"op\": \"%s\", \"path\": \"/data/a\", \"value\": \"patched\"}]'\n"
	files := map[string]string{
		"chart/Chart.yaml":          "apiVersion: v2\nname: layered\nversion: 0.1.0\n",
		"chart/templates/cm.yaml":   "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\ndata: {a: chart}\n",
		"chart/templates/hook.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: h, annotations: {helm.sh/hook: pre-install}}\ndata: {a: chart}\n",
		"watches.yaml":              fmt.Sprintf(watch, "replace"),
		"broken.yaml":               fmt.Sprintf(watch, "test"),
		"cr.yaml":                   "apiVersion: test.rudder.dev/v1\nkind: Layered\nmetadata: {name: r, namespace: ns}\nspec: {}\n",
	}
	writeFiles(t, dir, files)
	cr := filepath.Join(dir, "cr.yaml")
	code, out, errOut := runCLI("template", "--watches-file", filepath.Join(dir, "watches.yaml"), cr)
	if code != 0 || strings.Count(out, "a: patched") != 2 || strings.Count(out, "team: platform") != 2 || strings.Contains(out, "a: chart") {
		t.Fatalf("exit %d, stderr %q: want the manifest and the hook patched and labelled:\n%s", code, errOut, out)
	}
	for _, cmd := range []string{"template", "lint"} {
		code, out, errOut = run(cmd, "--watches-file", filepath.Join(dir, "broken.yaml"), cr)
		if code == 0 || !strings.Contains(out+errOut, "postRenderers[0].kustomize.patches[0] (target ConfigMap/*)") {
			t.Errorf("%s with a patch that does not apply: exit %d, out %q, stderr %q", cmd, code, out, errOut)
		}
	}
}

// rudder template and rudder lint refuse what the install would, for what a release grants,
// asks of a node and names: a privileged Pod, a binding of admin and another app's Secret,
// each named with the watch field that would allow it; the same CR under a watch that allows
// them renders.
func TestTemplateRefusesWhatTheInstallWould(t *testing.T) {
	dir := t.TempDir()
	cr := "apiVersion: test.rudder.dev/v1\nkind: Box\nmetadata: {name: r, namespace: ns}\nspec:\n  extraObjects:\n" +
		"  - {apiVersion: v1, kind: Pod, metadata: {name: p}, spec: {hostPID: true, containers: [{name: c, image: i}], volumes: [{name: db, secret: {secretName: payments-db}}]}}\n" +
		"  - {apiVersion: rbac.authorization.k8s.io/v1, kind: RoleBinding, metadata: {name: b}, roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: admin}, subjects: []}\n"
	files := map[string]string{
		"chart/Chart.yaml":           "apiVersion: v2\nname: box\nversion: 0.1.0\n",
		"chart/values.yaml":          "extraObjects: []\n",
		"chart/templates/extra.yaml": "{{- range .Values.extraObjects }}\n---\n{{ tpl (toYaml .) $ }}\n{{- end }}\n",
		"watches.yaml":               "- {group: test.rudder.dev, version: v1, kind: Box, chart: chart}\n",
		"allowed.yaml":               "- {group: test.rudder.dev, version: v1, kind: Box, chart: chart, podSecurity: privileged, allowRoles: [ClusterRole/admin], allowReads: [Secret/payments-db]}\n",
		"cr.yaml":                    cr,
	}
	writeFiles(t, dir, files)
	wf, crf := filepath.Join(dir, "watches.yaml"), filepath.Join(dir, "cr.yaml")
	want := []string{`violates PodSecurity "baseline:latest": host namespaces (hostPID=true)`, "podSecurity is baseline",
		`binds the ClusterRole "admin"`, "allowRoles", `spec.volumes[db].secret.secretName names the Secret "payments-db"`, "allowReads"}
	code, _, errOut := runCLI("template", "--watches-file", wf, crf)
	for _, w := range want {
		if code == 0 || !strings.Contains(errOut, w) {
			t.Errorf("template: exit %d, stderr lacks %q:\n%s", code, w, errOut)
		}
	}
	code, out, _ := runCLI("lint", "--watches-file", wf, crf)
	if code == 0 || !strings.Contains(out, `binds the ClusterRole "admin"`) {
		t.Errorf("lint: exit %d:\n%s", code, out)
	}
	if code, out, errOut := runCLI("template", "--watches-file", filepath.Join(dir, "allowed.yaml"), crf); code != 0 || !strings.Contains(out, "hostPID: true") {
		t.Errorf("template under a watch that allows it: exit %d, stderr %q:\n%s", code, errOut, out)
	}
}

// runCLI runs rudder with args: its exit code, standard output and standard error.
func runCLI(args ...string) (int, string, string) {
	var out, errOut bytes.Buffer
	code := Run(context.Background(), args, Env{Stdout: &out, Stderr: &errOut})
	return code, out.String(), errOut.String()
}

// Every command that reads a chart reads it as the watcher does: a symlink out of the chart
// refuses it, naming the file and where it points, and nothing of its target is printed.
func TestCommandsReadOnlyTheChart(t *testing.T) {
	dir := t.TempDir()
	secret := filepath.Join(t.TempDir(), "kubeconfig")
	writeFile(t, secret, "token: s3cr3t-admin\n")
	writeFiles(t, dir, map[string]string{
		"chart/Chart.yaml":        "apiVersion: v2\nname: leaky\nversion: 0.1.0\n",
		"chart/values.yaml":       "a: 1\n",
		"chart/templates/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\ndata:\n{{- range $p, $_ := .Files.Glob \"files/*\" }}\n  {{ base $p }}: {{ $.Files.Get $p | quote }}\n{{- end }}\n",
		"watches.yaml":            "- {group: test.rudder.dev, version: v1, kind: Leaky, chart: chart}\n",
		"clean/Chart.yaml":        "apiVersion: v2\nname: leaky\nversion: 0.1.0\n",
		"clean/templates/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n",
		"clean.yaml":              "- {group: test.rudder.dev, version: v1, kind: Leaky, chart: clean}\n",
		"cr.yaml":                 "apiVersion: test.rudder.dev/v1\nkind: Leaky\nmetadata: {name: r, namespace: ns}\nspec: {}\n",
	})
	if err := os.MkdirAll(filepath.Join(dir, "chart", "files"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(secret, filepath.Join(dir, "chart", "files", "creds")); err != nil {
		t.Fatal(err)
	}
	wf, cr := filepath.Join(dir, "watches.yaml"), filepath.Join(dir, "cr.yaml")
	for _, args := range [][]string{
		{"lint", "--watches-file", wf, cr},
		{"template", "--watches-file", wf, cr},
		{"diff", "--from", filepath.Join(dir, "clean.yaml"), "--watches-file", wf, cr},
		{"scaffold", "--chart", filepath.Join(dir, "chart"), "--group", "test.rudder.dev", "--version", "v1", "--kind", "Leaky", "--output", filepath.Join(dir, "out")},
	} {
		code, out, errOut := runCLI(args...)
		if code == 0 || !strings.Contains(out+errOut, "files/creds is a symlink to "+secret) || strings.Contains(out+errOut, "s3cr3t") {
			t.Errorf("rudder %s: exit %d, stdout:\n%s\nstderr:\n%s", args[0], code, out, errOut)
		}
	}
}

// What a chart's defaults name after the release is the chart's whatever the release is
// called: under its scaffolded watch, the webstack chart (helm create's fullname helper, a pod
// template reading "<fullname>-redis", which it does not make) renders for CRs named sample,
// webstack-sample and webstack, although the last two name "<release>-redis", not the
// "<release>-webstack-redis" scaffold saw; a Secret values add is refused for each.
func TestReferencesHoldForEveryReleaseName(t *testing.T) {
	dir := t.TempDir()
	chart, err := filepath.Abs(filepath.Join("..", "..", "config", "testdata", "charts", "webstack"))
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "out")
	if code, _, errOut := runCLI("scaffold", "--chart", chart, "--group", "webstack.test.rudder.dev", "--version", "v1", "--kind", "Webstack", "--output", out); code != 0 {
		t.Fatalf("scaffold: exit %d: %s", code, errOut)
	}
	wf := filepath.Join(out, "watches.yaml")
	watch, err := os.ReadFile(wf)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(watch), "Secret/<release>-webstack-redis") {
		t.Fatalf("scaffold's watch does not list the reference it saw:\n%s", watch)
	}
	for _, name := range []string{"sample", "webstack-sample", "webstack"} {
		for _, extra := range []string{"", "other", name + "-other"} {
			cr := filepath.Join(dir, name+extra+".yaml")
			writeFile(t, cr, fmt.Sprintf("apiVersion: webstack.test.rudder.dev/v1\nkind: Webstack\nmetadata: {name: %s, namespace: ns}\nspec: {extraEnvSecret: %q}\n", name, extra))
			code, stdout, errOut := runCLI("template", "--watches-file", wf, cr)
			fullname := name + "-webstack"
			if strings.Contains(name, "webstack") {
				fullname = name
			}
			switch {
			case extra == "" && (code != 0 || !strings.Contains(stdout, "name: "+fullname+"-redis")):
				t.Errorf("%s: exit %d, stderr %q, stdout:\n%s", name, code, errOut, stdout)
			case extra != "" && (code == 0 || !strings.Contains(errOut, fmt.Sprintf("names the Secret %q", extra))):
				t.Errorf("%s with extraEnvSecret %s: exit %d, stderr %q", name, extra, code, errOut)
			}
		}
	}
}
