package config_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/utils/clock"

	rstatus "github.com/rudder-operator/rudder/api/status"
	"github.com/rudder-operator/rudder/internal/crtest"
	"github.com/rudder-operator/rudder/internal/wiring"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rudder-operator/rudder/internal/cli"
	"github.com/rudder-operator/rudder/internal/watches"
)

// rudderCLI runs a subcommand in-process and returns its exit code and output.
func rudderCLI(args ...string) (int, string, string) {
	var out, errOut bytes.Buffer
	code := cli.Run(context.Background(), args, cli.Env{Stdout: &out, Stderr: &errOut, Hooks: wiring.BuiltinHooks(clock.RealClock{})})
	return code, out.String(), errOut.String()
}

// TestBringYourOwnChart: `rudder scaffold` makes a kind of a chart made by `helm create` and of a
// built-in chart: the CRD applies, kubectl explain shows the types, a wrong type is refused
// naming the field, and rudder — as its ServiceAccount, with config/rbac plus the scaffolded
// role, aggregated — brings the sample to Ready. `rudder template` prints exactly the manifest
// rudder applied, and refuses an escape; `rudder lint` passes the chart and fails a broken one.
func TestBringYourOwnChart(t *testing.T) {
	crtest.NeedsCluster(t)
	deploy(t)
	ctx := context.Background()
	tmp := t.TempDir()
	tool(t, "helm", "create", filepath.Join(tmp, "mychart"))

	cases := []struct {
		chart, kind, plural, field, fieldType, wrong string
	}{
		// values.yaml only: the schema is inferred.
		{filepath.Join(tmp, "mychart"), "MyApp", "myapps", "replicaCount", "<integer>", `"three"`},
		// values.schema.json, translated.
		{filepath.Join(root, "charts", "nginx"), "WebServer", "webservers", "port", "<integer>", `"http"`},
	}
	for _, tc := range cases {
		t.Run(tc.kind, func(t *testing.T) {
			out := filepath.Join(tmp, tc.kind)
			code, stdout, stderr := rudderCLI("scaffold", "--chart", tc.chart, "--group", "byoc.rudder.dev", "--version", "v1", "--kind", tc.kind, "--output", out)
			if code != 0 {
				t.Fatalf("scaffold: %d\n%s%s", code, stdout, stderr)
			}
			if !strings.Contains(stdout, "Deployment (apps/v1)") {
				t.Fatalf("scaffold does not say which kinds it found:\n%s", stdout)
			}
			kubectl(t, "apply", "--server-side", "-k", out)
			t.Cleanup(func() { removeScaffolded(t, "rudder-"+tc.plural+".byoc.rudder.dev", "byoc.rudder.dev") })
			waitEstablished(t, tc.plural+".byoc.rudder.dev")
			crtest.Eventually(t, "kubectl explain "+tc.field, 30*time.Second, func(context.Context) (bool, error) {
				cmd := cluster.Command("kubectl", "explain", tc.plural+".spec."+tc.field)
				b, err := cmd.CombinedOutput()
				return err == nil && strings.Contains(string(b), tc.fieldType), nil
			})
			bad := "apiVersion: byoc.rudder.dev/v1\nkind: " + tc.kind + "\nmetadata: {name: bad, namespace: default}\nspec: {" + tc.field + ": " + tc.wrong + "}\n"
			cmd := cluster.Command("kubectl", "apply", "-f", "-")
			cmd.Stdin = strings.NewReader(bad)
			if b, err := cmd.CombinedOutput(); err == nil || !strings.Contains(string(b), "spec."+tc.field) {
				t.Fatalf("a wrong type was not refused naming spec.%s: %v\n%s", tc.field, err, b)
			}

			// rudder as its ServiceAccount: config/rbac's aggregated role now holds the kind's.
			ws, err := watches.Load(filepath.Join(out, "watches.yaml"))
			if err != nil {
				t.Fatal(err)
			}
			ns := "byoc-" + strings.ToLower(tc.kind)
			if err := k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
				t.Fatal(err)
			}
			startRudderWith(t, asServiceAccount(systemNS, "rudder-manager"), ws, wiring.ManagerOptions{WatchNamespaces: []string{ns}, SeveralManagers: true})
			kubectl(t, "apply", "-n", ns, "-f", filepath.Join(out, "sample.yaml"))
			gvk := schema.GroupVersionKind{Group: "byoc.rudder.dev", Version: "v1", Kind: tc.kind}
			name := strings.ToLower(tc.kind) + "-sample"
			u := crtest.WaitCondition(t, k8s, gvk, ns, name, "Ready", metav1.ConditionTrue, "", 120*time.Second)
			// The scaffolded schema keeps status.inventory, and its category lists the kind in
			// rudder get without a KIND.
			if inv := rstatus.InventoryOf(u); inv == nil || inv.Revision != 1 || inv.Count == 0 || len(inv.Entries) != inv.Count {
				t.Fatalf("status.inventory of a scaffolded kind: %+v", inv)
			}
			code, stdout, stderr = rudderCLI("get", "-n", ns, "-o", "name", "--kubeconfig", cluster.Kubeconfig)
			if want := strings.ToLower(tc.kind) + ".byoc.rudder.dev/" + name + "\n"; code != 0 || !strings.Contains(stdout, want) {
				t.Fatalf("rudder get -o name: exit %d, %s%s; want %s", code, stdout, stderr, want)
			}

			// rudder template of the live CR prints exactly what rudder applied.
			live := filepath.Join(tmp, tc.kind+"-live.yaml")
			if err := os.WriteFile(live, []byte(kubectl(t, "get", strings.ToLower(tc.kind), name, "-n", ns, "-o", "yaml")), 0o644); err != nil {
				t.Fatal(err)
			}
			code, stdout, stderr = rudderCLI("template", "--watches-file", filepath.Join(out, "watches.yaml"), live)
			if code != 0 {
				t.Fatalf("template: %d %s", code, stderr)
			}
			applied := tool(t, "helm", "get", "manifest", name, "-n", ns)
			if got := manifestOf(stdout); strings.TrimSpace(got) != strings.TrimSpace(applied) {
				t.Fatalf("rudder template differs from helm get manifest:\n--- template\n%s\n--- applied\n%s", got, applied)
			}

			if code, stdout, stderr := rudderCLI("lint", "--watches-file", filepath.Join(out, "watches.yaml"), filepath.Join(out, "sample.yaml")); code != 0 {
				t.Fatalf("lint of a good chart: %d\n%s%s", code, stdout, stderr)
			}
		})
	}

	// A broken template fails lint, naming the file.
	broken := filepath.Join(tmp, "broken")
	tool(t, "helm", "create", broken)
	if err := os.WriteFile(filepath.Join(broken, "templates", "oops.yaml"), []byte("{{ .Values.x | nope }}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	wf := filepath.Join(tmp, "broken-watches.yaml")
	if err := os.WriteFile(wf, []byte("- {group: byoc.rudder.dev, version: v1, kind: Broken, chart: broken}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, stdout, _ := rudderCLI("lint", "--watches-file", wf); code != 1 || !strings.Contains(stdout, "oops.yaml") {
		t.Fatalf("lint of a broken chart: exit %d, want 1 naming oops.yaml:\n%s", code, stdout)
	}

	// A namespace escape exits 1, naming the namespace.
	cr := filepath.Join(tmp, "escape.yaml")
	if err := os.WriteFile(cr, []byte("apiVersion: test.rudder.dev/v1\nkind: Widget\nmetadata: {name: w, namespace: mine}\nspec: {otherNamespace: victim}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := rudderCLI("template", "--watches-file", filepath.Join(root, "controllers/testdata/watches-escape.yaml"), cr)
	if code != 1 || !strings.Contains(stderr, `namespace "victim"`) || strings.Contains(stdout, "victim") {
		t.Fatalf("template of an escape: exit %d\nstdout: %s\nstderr: %s", code, stdout, stderr)
	}
}

// removeScaffolded deletes a scaffolded role and waits until rudder's aggregated role no longer
// holds its rules for the kind's group, which later tests must not inherit. (The CRD stays: its
// CRs keep rudder's finalizer once no rudder runs.)
func removeScaffolded(t *testing.T, role, group string) {
	t.Helper()
	kubectl(t, "delete", "--ignore-not-found", "clusterrole", role)
	crtest.Eventually(t, "rudder-manager without "+role, 30*time.Second, func(ctx context.Context) (bool, error) {
		var agg rbacv1.ClusterRole
		if err := k8s.Get(ctx, client.ObjectKey{Name: "rudder-manager"}, &agg); err != nil {
			return false, err
		}
		for _, r := range agg.Rules {
			for _, g := range r.APIGroups {
				if g == group {
					return false, nil
				}
			}
		}
		return true, nil
	})
}

// manifestOf is the manifest part of `rudder template` output for one CR: without the header
// comment and the hooks, which `helm get manifest` does not show.
func manifestOf(out string) string {
	_, rest, _ := strings.Cut(out, "\n")
	if i := strings.Index(rest, "---\n# Hook"); i >= 0 {
		rest = rest[:i]
	}
	return rest
}
