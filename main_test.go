package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

func TestMemoryPolicy(t *testing.T) {
	const mi = 1 << 20
	env := func(kv ...string) func(string) string {
		return func(k string) string {
			for i := 0; i+1 < len(kv); i += 2 {
				if kv[i] == k {
					return kv[i+1]
				}
			}
			return ""
		}
	}
	for _, c := range []struct {
		name          string
		getenv        func(string) string
		limit, budget int64
		gc            int
		mem           int64
	}{
		{"no container limit", env(), 0, 0, defaultGCPercent, 0},
		{"rudder's share of the container", env(), 1024 * mi, 768 * mi, defaultGCPercent, 256 * mi},
		{"no render budget: the whole container", env(), 1024 * mi, 0, defaultGCPercent, 1024 * mi},
		{"a budget as large as the container leaves rudder no share to set", env(), 1024 * mi, 1024 * mi, defaultGCPercent, 0},
		{"GOGC set: the runtime's", env("GOGC", "200"), 1024 * mi, 768 * mi, 0, 256 * mi},
		{"GOMEMLIMIT set: the runtime's", env("GOMEMLIMIT", "300MiB"), 1024 * mi, 768 * mi, defaultGCPercent, 0},
	} {
		gc, mem := memoryPolicy(c.getenv, c.limit, c.budget)
		if gc != c.gc || mem != c.mem {
			t.Errorf("%s: GOGC %d, limit %d; want %d, %d", c.name, gc, mem, c.gc, c.mem)
		}
	}
}

// TestKubectlPlugin: the binary named kubectl-rudder on the PATH is a kubectl plugin:
// `kubectl rudder version` runs it, and its help speaks of `kubectl rudder`.
func TestKubectlPlugin(t *testing.T) {
	if testing.Short() {
		t.Skip("builds rudder and runs kubectl")
	}
	kubectl, err := filepath.Abs(filepath.Join("bin", "kubectl"))
	if err == nil {
		_, err = os.Stat(kubectl)
	}
	if err != nil {
		t.Skipf("no bin/kubectl (make tools): %v", err)
	}
	dir := t.TempDir()
	build := exec.Command("go", "build", "-o", filepath.Join(dir, "kubectl-rudder"), ".")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	run := func(args ...string) string {
		cmd := exec.Command(kubectl, args...)
		cmd.Env = append(os.Environ(), "PATH="+dir+string(os.PathListSeparator)+os.Getenv("PATH"), "KUBECONFIG="+filepath.Join(dir, "none"))
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("kubectl %v: %v\n%s", args, err, out)
		}
		return string(out)
	}
	if out := run("plugin", "list"); !strings.Contains(out, filepath.Join(dir, "kubectl-rudder")) {
		t.Errorf("kubectl plugin list:\n%s", out)
	}
	if out := run("rudder", "version"); !strings.HasPrefix(out, "rudder ") {
		t.Errorf("kubectl rudder version:\n%s", out)
	}
	if out := run("rudder", "lint", "--help"); !strings.Contains(out, "kubectl rudder lint [CR_FILE...]") {
		t.Errorf("kubectl rudder lint --help:\n%s", out)
	}
}
