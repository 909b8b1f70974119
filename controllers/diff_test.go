package controllers_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	rstatus "github.com/rudder-operator/rudder/api/status"
	"github.com/rudder-operator/rudder/internal/cli"
	"github.com/rudder-operator/rudder/internal/crtest"
)

// TestDiffAgainstTheCluster: `rudder diff --cluster` compares every Widget of a namespace,
// rendered with an edited copy of the widget chart, with its release's newest revision as
// rudder stored it: the unedited chart (comments added) changes nothing, exactly as rudder
// rendered it, a values edit changes the one object it reaches in each release, and an edit of
// a Deployment's selector is named as one that needs upgrade.force (the API server's dry run
// refuses the update).
func TestDiffAgainstTheCluster(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ns := crtest.NewNamespace(t, k8s, "diff-")
	for _, name := range []string{"one", "two"} {
		if err := k8s.Create(ctx, crtest.NewCR(widgetGVK, ns, name, map[string]any{"replicas": int64(2)})); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range []string{"one", "two"} {
		crtest.WaitCondition(t, k8s, widgetGVK, ns, name, rstatus.TypeReleased, metav1.ConditionTrue, "", timeout)
	}
	edited := t.TempDir()
	if err := os.CopyFS(filepath.Join(edited, "widget"), os.DirFS(filepath.Join(chartDir, "widget"))); err != nil {
		t.Fatal(err)
	}
	wf := filepath.Join(edited, "watches.yaml")
	if err := os.WriteFile(wf, []byte("- {group: test.rudder.dev, version: v1, kind: Widget, chart: widget}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	diff := func() (int, string) {
		var stdout, stderr bytes.Buffer
		code := cli.Run(ctx, []string{"diff", "--cluster", "--kubeconfig", cluster.Kubeconfig, "--namespace", ns, "--watches-file", wf},
			cli.Env{Stdout: &stdout, Stderr: &stderr})
		return code, stdout.String() + stderr.String()
	}
	values := filepath.Join(edited, "widget", "values.yaml")
	b, err := os.ReadFile(values)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(values, append(b, "# a comment the edit adds\n"...), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, out := diff(); code != 0 || out != "" {
		t.Fatalf("a comment: exit %d, want 0 and nothing\n%s", code, out)
	}

	if err := os.WriteFile(values, []byte(strings.Replace(string(b), "message: hello", "message: edited", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out := diff()
	for _, name := range []string{"one", "two"} {
		for _, want := range []string{
			"# Widget " + ns + "/" + name + ": release " + name + " in namespace " + ns + ": 1 object changes",
			"+++ after/ConfigMap/" + ns + "/" + name,
			`+  message: edited`,
		} {
			if !strings.Contains(out, want) {
				t.Errorf("no %q in", want)
			}
		}
	}
	if code != 1 || t.Failed() {
		t.Fatalf("a values edit: exit %d, want 1\n%s", code, out)
	}
	if strings.Contains(out, "upgrade.force") {
		t.Fatalf("a values edit said to need upgrade.force:\n%s", out)
	}

	tmpl := filepath.Join(edited, "widget", "templates", "all.yaml")
	tb, err := os.ReadFile(tmpl)
	if err != nil {
		t.Fatal(err)
	}
	selector := strings.ReplaceAll(string(tb), "{app: {{ .Release.Name }}}", "{app: {{ .Release.Name }}-v2}")
	if selector == string(tb) {
		t.Fatal("the widget chart's selector is not where the test edits it")
	}
	if err := os.WriteFile(tmpl, []byte(selector), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out = diff()
	for _, name := range []string{"one", "two"} {
		want := "! Widget " + ns + "/" + name + ": Deployment.apps/" + ns + "/" + name + " changes a field that cannot change: its upgrade fails and is rolled back unless the watch sets upgrade.force"
		if !strings.Contains(out, want) {
			t.Errorf("no %q in", want)
		}
	}
	if code != 1 || t.Failed() {
		t.Fatalf("a selector edit: exit %d, want 1\n%s", code, out)
	}
}
