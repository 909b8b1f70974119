package cli

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// diffCase is a chart served as a kind, before and after an edit.
type diffCase struct {
	name  string
	chart string
	// entry is the watches entry (its chart: CHART); "" scaffolds one, with its sample.
	entry, sample string
	// values matches the line of values.yaml the values edit changes, to replace.
	values  *regexp.Regexp
	replace string
	// want are the objects the values edit changes, by kind.
	want []string
}

// served copies the chart into dir/chart and writes dir/watches.yaml serving it; it returns
// the sample CR file.
func (c diffCase) served(t *testing.T, dir string) string {
	t.Helper()
	chart := filepath.Join(dir, "chart")
	if err := os.CopyFS(chart, os.DirFS(c.chart)); err != nil {
		t.Fatal(err)
	}
	if c.entry != "" {
		writeFiles(t, dir, map[string]string{"watches.yaml": strings.ReplaceAll(c.entry, "CHART", chart)})
		return c.sample
	}
	out := filepath.Join(dir, "scaffold")
	args := []string{"scaffold", "--chart", chart, "--group", "diff.rudder.dev", "--version", "v1", "--kind", c.name, "--output", out}
	if code, _, stderr := run(args...); code != 0 {
		t.Fatalf("scaffold: %d: %s", code, stderr)
	}
	if err := os.Rename(filepath.Join(out, "watches.yaml"), filepath.Join(dir, "watches.yaml")); err != nil {
		t.Fatal(err)
	}
	// A CR that sets nothing, so that the chart's defaults are its values (scaffold's sample
	// spells every default out, and an edit of one would not reach it).
	writeFiles(t, dir, map[string]string{"cr.yaml": "apiVersion: diff.rudder.dev/v1\nkind: " + c.name + "\nmetadata:\n  name: sample\nspec: {}\n"})
	return filepath.Join(dir, "cr.yaml")
}

func run(args ...string) (int, string, string) {
	var stdout, stderr bytes.Buffer
	code := Run(context.Background(), args, Env{Stdout: &stdout, Stderr: &stderr})
	return code, stdout.String(), stderr.String()
}

func appendTo(t *testing.T, path, text string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(text); err != nil {
		t.Fatal(err)
	}
}

// TestDiffOfChartEdits: on the repository's charts and the compatibility suite's public
// charts, `rudder diff` shows nothing for comments in values.yaml and a template (exit 0), and
// for a values edit exactly the object it changes (exit 1).
func TestDiffOfChartEdits(t *testing.T) {
	root := filepath.Join("..", "..")
	public := filepath.Join(root, "config", "testdata", "public")
	for _, c := range []diffCase{
		{name: "NginxOperator", chart: filepath.Join(root, "charts", "nginx"),
			entry:  "- {group: operator.example.com, version: v1alpha1, kind: NginxOperator, chart: CHART}\n",
			sample: filepath.Join(root, "config", "samples", "operator_v1alpha1_nginxoperator.yaml"),
			values: regexp.MustCompile(`(?m)^image: nginx:1.27.3$`), replace: "image: nginx:1.27.4", want: []string{"Deployment.apps"}},
		{name: "Grafana", chart: filepath.Join(public, "grafana"),
			values: regexp.MustCompile(`(?m)^replicas: 1$`), replace: "replicas: 2", want: []string{"Deployment.apps"}},
		{name: "IngressNginx", chart: filepath.Join(public, "ingress-nginx"),
			// Two controllers get a PodDisruptionBudget too.
			values: regexp.MustCompile(`(?m)^  replicaCount: 1$`), replace: "  replicaCount: 2", want: []string{"Deployment.apps", "PodDisruptionBudget.policy"}},
		{name: "Widget", chart: filepath.Join(root, "config", "testdata", "charts", "widget"),
			values: regexp.MustCompile(`(?m)^message: .*$`), replace: "message: edited", want: []string{"ConfigMap"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			tmp := t.TempDir()
			before, after := filepath.Join(tmp, "before"), filepath.Join(tmp, "after")
			sample := c.served(t, before)
			c.served(t, after)
			diff := func() (int, string, string) {
				return run("diff", "--from", filepath.Join(before, "watches.yaml"), "--watches-file", filepath.Join(after, "watches.yaml"), sample)
			}
			// Values a chart generates on every render (Grafana's admin password) are said, and
			// not compared.
			if code, stdout, stderr := diff(); code != 0 || strings.Contains(stdout, "--- before/") {
				t.Fatalf("no edit: exit %d\n%s%s", code, stdout, stderr)
			}

			// Comments.
			appendTo(t, filepath.Join(after, "chart", "values.yaml"), "\n# a comment the edit adds\n")
			templates, err := filepath.Glob(filepath.Join(after, "chart", "templates", "*.yaml"))
			if err != nil || len(templates) == 0 {
				t.Fatalf("templates: %v %v", templates, err)
			}
			appendTo(t, templates[0], "\n{{- /* a comment the edit adds */ -}}\n")
			if code, stdout, stderr := diff(); code != 0 || strings.Contains(stdout, "--- before/") {
				t.Fatalf("comments: exit %d, want 0 and no change\n%s%s", code, stdout, stderr)
			}

			// A values edit.
			path := filepath.Join(after, "chart", "values.yaml")
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			loc := c.values.FindIndex(b)
			if loc == nil {
				t.Fatalf("values.yaml has no line %s", c.values)
			}
			edited := string(b[:loc[0]]) + c.replace + string(b[loc[1]:])
			writeFiles(t, filepath.Join(after, "chart"), map[string]string{"values.yaml": edited})
			code, stdout, stderr := diff()
			var changed []string
			for _, m := range regexp.MustCompile(`(?m)^\+\+\+ after/([^/]+)/`).FindAllStringSubmatch(stdout, -1) {
				changed = append(changed, m[1])
			}
			slices.Sort(changed)
			if code != 1 || !slices.Equal(changed, c.want) {
				t.Fatalf("values edit: exit %d, %v changing; want 1 and %v\n%s%s", code, changed, c.want, stdout, stderr)
			}
		})
	}
}

// TestDiffNamesWhatTheEditBreaks: an edit that renders outside the namespace, past a limit,
// or with a schema the CR's values fail is named as such (exit 1); trouble is exit 2.
func TestDiffNamesWhatTheEditBreaks(t *testing.T) {
	tmp := t.TempDir()
	chart := map[string]string{
		"Chart.yaml":             "apiVersion: v2\nname: small\nversion: 0.1.0\n",
		"values.yaml":            "message: hello\n",
		"templates/a.yaml":       "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}-a\ndata:\n  message: {{ .Values.message | quote }}\n",
		"templates/b.yaml":       "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}-b\n",
		"templates/_helpers.tpl": "",
	}
	entry := "- {group: small.rudder.dev, version: v1, kind: Small, chart: chart%s}\n"
	writeFiles(t, filepath.Join(tmp, "before", "chart"), chart)
	writeFiles(t, filepath.Join(tmp, "before"), map[string]string{"watches.yaml": strings.Replace(entry, "%s", "", 1)})
	writeFiles(t, tmp, map[string]string{"cr.yaml": "apiVersion: small.rudder.dev/v1\nkind: Small\nmetadata:\n  name: s\n  namespace: team\nspec: {}\n"})
	for _, c := range []struct {
		name    string
		edit    map[string]string
		options string // more of the edited watches entry
		want    string
	}{
		{"outside the namespace", map[string]string{"templates/b.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: b\n  namespace: kube-system\n"}, "",
			"the edit makes it fail (breaks the watch's confinement)"},
		{"past a limit", nil, ", limits: {maxObjects: 1}", "the edit makes it fail (past the watch's limit maxObjects)"},
		{"a schema the values fail", map[string]string{"values.schema.json": `{"type": "object", "required": ["size"]}`}, "",
			"the edit makes it fail (values do not validate)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			after := filepath.Join(t.TempDir(), "after")
			writeFiles(t, filepath.Join(after, "chart"), chart)
			writeFiles(t, filepath.Join(after, "chart"), c.edit)
			writeFiles(t, after, map[string]string{"watches.yaml": strings.Replace(entry, "%s", c.options, 1)})
			code, stdout, stderr := run("diff", "--from", filepath.Join(tmp, "before", "watches.yaml"), "--watches-file", filepath.Join(after, "watches.yaml"), filepath.Join(tmp, "cr.yaml"))
			if code != 1 || !strings.Contains(stdout, "! Small team/s: "+c.want) {
				t.Fatalf("exit %d, want 1 and %q\n%s%s", code, c.want, stdout, stderr)
			}
		})
	}
	if code, _, stderr := run("diff", "--from", filepath.Join(tmp, "nowhere.yaml"), "--watches-file", filepath.Join(tmp, "before", "watches.yaml"), filepath.Join(tmp, "cr.yaml")); code != 2 || !strings.Contains(stderr, "--from") {
		t.Fatalf("a --from that does not load: exit %d, want 2\n%s", code, stderr)
	}
	for _, args := range [][]string{
		{"diff", filepath.Join(tmp, "cr.yaml")},                                  // neither --from nor --cluster
		{"diff", "--cluster", "--from", "w.yaml", filepath.Join(tmp, "cr.yaml")}, // both
		{"diff", "--cluster", filepath.Join(tmp, "cr.yaml")},                     // CR files against a cluster
	} {
		if code, _, _ := run(args...); code != 2 {
			t.Fatalf("%v: exit %d, want 2 (usage)", args, code)
		}
	}
}
