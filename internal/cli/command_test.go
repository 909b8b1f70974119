package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/pflag"
)

// TestHelpExitsZero: help, asked for in every way cobra knows, prints the subcommand's own
// help (its usage line and an example) and exits 0.
func TestHelpExitsZero(t *testing.T) {
	for _, sub := range []string{"run", "diff", "lint", "scaffold", "template", "version", "completion"} {
		for _, args := range [][]string{{"help", sub}, {sub, "-h"}, {sub, "--help"}} {
			code, out, errOut := runCLI(args...)
			if code != 0 || !strings.Contains(out, "rudder "+sub) || !strings.Contains(out, "Usage:") {
				t.Errorf("%v: exit %d, stderr %q:\n%s", args, code, errOut, out)
			}
			if sub != "completion" && !strings.Contains(out, "Examples:") {
				t.Errorf("%v: no example:\n%s", args, out)
			}
		}
	}
	_, help, _ := runCLI("help")
	for _, args := range [][]string{{"-h"}, {"--help"}, {}} {
		if code, out, _ := runCLI(args...); code != 0 || out != help {
			t.Errorf("%v: exit %d, and not the text of `rudder help`:\n%s", args, code, out)
		}
	}
}

// TestCommandLineErrorsExitTwo: what cannot run exits 2 and says why, pointing at the help.
func TestCommandLineErrorsExitTwo(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"lint", "--nope"}, "unknown flag: --nope"},
		{[]string{"lint", "--leader-elect"}, "unknown flag: --leader-elect"},
		{[]string{"template"}, "at least one CR file is required"},
		{[]string{"version", "extra"}, `takes no arguments, got ["extra"]`},
		{[]string{"diff"}, "[from cluster] is required"},
		{[]string{"diff", "--from", "w.yaml", "--cluster"}, "[cluster from] were all set"},
		{[]string{"diff", "--cluster", "--record", "-n", "ns"}, "[namespace record] were all set"},
		{[]string{"diff", "--from", "w.yaml"}, "--from needs the CR files"},
		{[]string{"diff", "--cluster", "cr.yaml"}, "--cluster reads the CRs from the cluster"},
		{[]string{"diff", "--from", "w.yaml", "--record", "cr.yaml"}, "go with --cluster"},
		{[]string{"diff", "--cluster", "--shard", "a=b"}, "--shard goes with --record"},
		{[]string{"version", "-o", "toml"}, `--output "toml"`},
	} {
		code, _, errOut := runCLI(tc.args...)
		if code != 2 || !strings.Contains(errOut, tc.want) || !strings.Contains(errOut, "--help") {
			t.Errorf("%v: exit %d, stderr %q; want 2 and %q", tc.args, code, errOut, tc.want)
		}
	}
}

// TestFlagsGoAnywhere: flags after positional arguments are flags, not file names, as in
// kubectl and helm; `--` ends them.
func TestFlagsGoAnywhere(t *testing.T) {
	dir := t.TempDir()
	wf := filepath.Join(dir, "w.yaml")
	cr := filepath.Join(dir, "cr.yaml")
	writeFile(t, wf, "- group: t.io\n  version: v1\n  kind: Box\n  chart: "+writeChart(t, dir)+"\n")
	writeFile(t, cr, "apiVersion: t.io/v1\nkind: Box\nmetadata: {name: b, namespace: ns}\nspec: {size: 3}\n")
	code, out, errOut := runCLI("template", cr, "--watches-file", wf)
	if code != 0 || !strings.Contains(out, `size: "3"`) {
		t.Fatalf("flag after the file: exit %d, stderr %q:\n%s", code, errOut, out)
	}
	if code, _, errOut := runCLI("template", "--watches-file", wf, "--", cr, "--kube-version"); code == 0 || !strings.Contains(errOut, "--kube-version") {
		t.Errorf("after --, a file named --kube-version: exit %d, stderr %q", code, errOut)
	}
	if code, out, _ := runCLI("lint", cr, "--watches-file", wf); code != 0 || !strings.Contains(out, "0 error(s)") {
		t.Errorf("lint, flag after the file: exit %d:\n%s", code, out)
	}
}

// TestManagerFlags: the operator runs with its flags at the root and as `rudder run`, and
// only there; a kubectl plugin runs it only as `kubectl rudder run`.
func TestManagerFlags(t *testing.T) {
	var watches string
	ran := 0
	mgr := func() *Manager {
		fs := pflag.NewFlagSet("manager", pflag.ContinueOnError)
		fs.StringVar(&watches, "watches-file", "./watches.yaml", "")
		return &Manager{Flags: fs, Run: func(context.Context) error { ran++; return nil }}
	}
	exec := func(env Env, args ...string) (int, string) {
		var out, errOut bytes.Buffer
		env.Stdout, env.Stderr = &out, &errOut
		return Execute(context.Background(), args, env, mgr()), out.String() + errOut.String()
	}
	for _, args := range [][]string{{"--watches-file", "a.yaml"}, {"run", "--watches-file", "a.yaml"}} {
		watches, ran = "", 0
		if code, out := exec(Env{}, args...); code != 0 || ran != 1 || watches != "a.yaml" {
			t.Errorf("%v: exit %d, ran %d times with %q:\n%s", args, code, ran, watches, out)
		}
	}
	ran = 0
	if code, out := exec(Env{}, "lint", "--watches-file", "none.yaml"); code != 1 || ran != 0 || !strings.Contains(out, "none.yaml") {
		t.Errorf("lint: exit %d, operator ran %d times:\n%s", code, ran, out)
	}
	if code, out := exec(Env{Plugin: true}); code != 0 || ran != 0 || !strings.Contains(out, "kubectl rudder [command]") {
		t.Errorf("kubectl rudder: exit %d, operator ran %d times:\n%s", code, ran, out)
	}
	if code, out := exec(Env{Plugin: true}, "run", "--watches-file", "b.yaml"); code != 0 || ran != 1 || watches != "b.yaml" {
		t.Errorf("kubectl rudder run: exit %d, ran %d:\n%s", code, ran, out)
	}
	if code, out := exec(Env{Plugin: true}, "template", "-h"); code != 0 || !strings.Contains(out, "kubectl rudder template CR_FILE...") {
		t.Errorf("kubectl rudder template -h: exit %d:\n%s", code, out)
	}
}

// TestCompletionParsesInBash: the bash completion script loads in bash and completes
// rudder's subcommands and a subcommand's flags.
func TestCompletionParsesInBash(t *testing.T) {
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("no bash")
	}
	code, script, errOut := runCLI("completion", "bash")
	if code != 0 || !strings.Contains(script, "__start_rudder") {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
	f := filepath.Join(t.TempDir(), "rudder.bash")
	writeFile(t, f, script)
	out, err := exec.Command(bash, "-c", "source "+f+" && complete -p rudder").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "__start_rudder") {
		t.Fatalf("sourcing the script: %v:\n%s", err, out)
	}
	// What the script asks the binary for when the user presses tab: cobra's __complete.
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"__complete", "te"}, "template"},
		{[]string{"__complete", "diff", "--re"}, "--record"},
		{[]string{"__complete", "scaffold", "--"}, "--set-string"},
	} {
		if _, out, _ := runCLI(tc.args...); !strings.Contains(out, tc.want) {
			t.Errorf("%v: %q lacks %q", tc.args, out, tc.want)
		}
	}
}

func TestVersion(t *testing.T) {
	code, out, errOut := runCLI("version", "-o", "json")
	var info BuildInfo
	if code != 0 || json.Unmarshal([]byte(out), &info) != nil || info.GoVersion == "" || info.Version == "" {
		t.Fatalf("exit %d, stderr %q:\n%s", code, errOut, out)
	}
	if code, out, _ := runCLI("version"); code != 0 || !strings.HasPrefix(out, "rudder "+info.Version+"\n") || !strings.Contains(out, "go: "+info.GoVersion) {
		t.Errorf("exit %d:\n%s", code, out)
	}
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// writeChart writes a chart of one ConfigMap holding .Values.size under dir.
func writeChart(t *testing.T, dir string) string {
	t.Helper()
	ch := filepath.Join(dir, "box")
	if err := os.MkdirAll(filepath.Join(ch, "templates"), 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(ch, "Chart.yaml"), "apiVersion: v2\nname: box\nversion: 0.1.0\n")
	writeFile(t, filepath.Join(ch, "values.yaml"), "size: 1\n")
	writeFile(t, filepath.Join(ch, "templates", "cm.yaml"), "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}\ndata:\n  size: {{ .Values.size | quote }}\n")
	return ch
}
