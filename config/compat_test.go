package config_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/rudder-operator/rudder/internal/chartsource"
	"github.com/rudder-operator/rudder/internal/crtest"
	"github.com/rudder-operator/rudder/internal/helm"
	"github.com/rudder-operator/rudder/internal/helm/helmtest"
	"github.com/rudder-operator/rudder/internal/watches"
	"github.com/rudder-operator/rudder/internal/wiring"
)

// compatCase is a chart the compatibility suite serves as a kind.
type compatCase struct {
	kind  string
	chart string   // directory
	args  []string // more scaffold flags (--set, --values)
	// drift, when set, changes an operand of the release by hand and waits until rudder has
	// restored it.
	drift func(t *testing.T, ns, release string)
	// public: one of the public charts, served for a CR whose name holds the chart's too (their
	// fullname helpers then drop the chart's name from their objects' names).
	public bool
}

// compatCases are the public charts of config/testdata/public and the suite's own, each written the
// way public charts are. RUDDER_COMPAT_CHART adds the user's chart (hack/chart-compat.sh), with
// RUDDER_COMPAT_ARGS as more scaffold flags.
func compatCases(t *testing.T) []compatCase {
	shared := filepath.Join(root, "config", "testdata", "public")
	cases := []compatCase{
		{kind: "Grafana", chart: filepath.Join(shared, "grafana"), public: true},
		{kind: "IngressNginx", chart: filepath.Join(shared, "ingress-nginx"), public: true},
		{kind: "BitnamiNginx", chart: filepath.Join(shared, "bitnami-nginx"), public: true},
		// Cluster-scoped kinds, an aggregated role, bindings of existing roles, a required value.
		{kind: "Agent", chart: filepath.Join(root, "config", "testdata", "charts", "clusterwide"), args: []string{"--set", "clusterName=compat"}},
		// ClusterRoles aggregated from parts (as kyverno's are): created under scaffold's role
		// (escalate on them), and none left once the CR is deleted.
		{kind: "Engine", chart: filepath.Join(root, "config", "testdata", "charts", "aggregated")},
		// A CRD in templates/ and a CR of it in the same release.
		{kind: "Bundle", chart: filepath.Join(root, "config", "testdata", "charts", "crdbundle"), drift: restoresGear},
		// A list of objects of different shapes in the defaults (a policy's plugins, each with
		// its own args): scaffold's schema takes every element.
		{kind: "PolicySet", chart: filepath.Join(root, "config", "testdata", "charts", "policies")},
		// Twenty CRDs rendering over the default maxManifestBytes: scaffold writes the limit.
		{kind: "CRDPack", chart: filepath.Join(root, "config", "testdata", "charts", "manycrds")},
	}
	if dir := os.Getenv("RUDDER_COMPAT_CHART"); dir != "" {
		cases = []compatCase{{kind: "UserChart", chart: dir, args: strings.Fields(os.Getenv("RUDDER_COMPAT_ARGS"))}}
	}
	for _, c := range cases {
		if _, err := os.Stat(filepath.Join(c.chart, "Chart.yaml")); err != nil {
			t.Fatalf("chart %s: %v (the public charts are in config/testdata/public)", c.chart, err)
		}
	}
	return cases
}

// TestChartCompat: for each chart, `rudder scaffold` writes what serves it, and rudder — as its
// ServiceAccount, with config/rbac plus the scaffolded role and nothing else, and the scaffolded
// watches entry unchanged — brings the sample (the chart's defaults) to Ready, makes no new
// revision while idle, makes exactly one on a chart edit, and leaves none of the release's
// objects once the CR is deleted; a public chart then serves a CR named after the chart too.
func TestChartCompat(t *testing.T) {
	crtest.NeedsCluster(t)
	deploy(t)
	for _, tc := range compatCases(t) {
		t.Run(tc.kind, func(t *testing.T) {
			t.Parallel()
			checkChartCompat(t, tc)
		})
	}
}

func checkChartCompat(t *testing.T, tc compatCase) {
	ctx := context.Background()
	s := serveScaffolded(t, tc, nil)
	gvk, ns, name, chartDir, ws := s.gvk, s.ns, s.name, s.chartDir, s.ws
	// 3. The sample becomes Ready.
	crtest.WaitCondition(t, k8s, gvk, ns, name, "Ready", metav1.ConditionTrue, "", 3*time.Minute)

	// 4. No new revision while idle.
	passes.Passes(t, k8s, gvk, ns, name, 2)
	release, err := ws[0].ReleaseNameOf(crtest.MustGet(t, k8s, gvk, ns, name))
	if err != nil {
		t.Fatal(err)
	}
	history := helmtest.History(t, cluster.Kubeconfig, ns, release)
	if len(history) != 1 {
		t.Fatalf("idle passes made revisions: history has %d, want 1", len(history))
	}
	// The release's objects, placed as Helm applies them (in the release's namespace when
	// namespaced and without one).
	objects := releaseObjects(t, history[0].Manifest, ns)
	for _, h := range history[0].Hooks {
		objects = append(objects, releaseObjects(t, h.Manifest, ns)...)
	}

	if tc.drift != nil {
		tc.drift(t, ns, release)
	}

	// 5. A chart edit makes exactly one new revision.
	editChartVersion(t, chartDir)
	crtest.Eventually(t, "revision 2, Ready", 3*time.Minute, func(ctx context.Context) (bool, error) {
		u, err := crtest.Get(ctx, k8s, gvk, ns, name)
		if err != nil {
			return false, err
		}
		rev, _, _ := unstructured.NestedInt64(u.Object, "status", "release", "revision")
		c := crtest.Condition(u, "Ready")
		return rev == 2 && c != nil && c.Status == metav1.ConditionTrue && c.ObservedGeneration == u.GetGeneration(), nil
	})
	passes.Passes(t, k8s, gvk, ns, name, 2)
	if history := helmtest.History(t, cluster.Kubeconfig, ns, release); len(history) != 2 {
		t.Fatalf("a chart edit: history has %d revisions, want 2", len(history))
	}

	// 6. Deleting the CR leaves none of the release's objects.
	cr := &unstructured.Unstructured{}
	cr.SetGroupVersionKind(gvk)
	cr.SetNamespace(ns)
	cr.SetName(name)
	if err := k8s.Delete(ctx, cr); err != nil {
		t.Fatal(err)
	}
	crtest.Eventually(t, "the CR and every object of its release gone", 2*time.Minute, func(ctx context.Context) (bool, error) {
		if _, err := crtest.Get(ctx, k8s, gvk, ns, name); !apierrors.IsNotFound(err) {
			return false, client.IgnoreNotFound(err)
		}
		for _, o := range objects {
			if err := k8s.Get(ctx, client.ObjectKeyFromObject(o), o.DeepCopy()); !gone(err) {
				t.Logf("still there: %s %s/%s (%v)", o.GetKind(), o.GetNamespace(), o.GetName(), err)
				return false, nil
			}
		}
		return true, nil
	})

	// 7. A public chart serves a CR whose name holds the chart's too, by the same watch: the
	// chart's fullname helper drops its suffix, and what the defaults name after the release
	// follows (issue 63). After the sample is gone: a public chart's fixed cluster-scoped names
	// (an IngressClass) hold one release per cluster.
	if tc.public {
		ch, err := chartsource.Load(tc.chart)
		if err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(filepath.Join(filepath.Dir(s.watchesFile), "sample.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		again := &unstructured.Unstructured{}
		if err := yaml.Unmarshal(b, &again.Object); err != nil {
			t.Fatal(err)
		}
		again.SetName(ch.Name())
		again.SetNamespace(ns)
		if err := k8s.Create(ctx, again); err != nil {
			t.Fatal(err)
		}
		crtest.WaitCondition(t, k8s, gvk, ns, ch.Name(), "Ready", metav1.ConditionTrue, "", 3*time.Minute)
		if err := k8s.Delete(ctx, again); err != nil {
			t.Fatal(err)
		}
		crtest.Eventually(t, "the CR named "+ch.Name()+" gone", 2*time.Minute, func(ctx context.Context) (bool, error) {
			_, err := crtest.Get(ctx, k8s, gvk, ns, ch.Name())
			return apierrors.IsNotFound(err), client.IgnoreNotFound(err)
		})
	}
}

// scaffolded is a chart served as a kind by serveScaffolded: its CR is applied.
type scaffolded struct {
	gvk                schema.GroupVersionKind
	ns, name, chartDir string
	ws                 []*watches.Watch
	// watchesFile is the scaffolded watches entry as rudder serves it; restart serves it again.
	watchesFile string
	stop        func()
}

// serveScaffolded scaffolds tc's chart as a kind, applies its CRD and role, starts rudder as
// its ServiceAccount with the scaffolded watches entry (changed by edit, when set, as a
// platform team edits it) and applies the sample in a new namespace.
func serveScaffolded(t *testing.T, tc compatCase, edit func(entry map[string]any)) scaffolded {
	t.Helper()
	tmp := t.TempDir()
	chartDir := filepath.Join(tmp, "chart")
	if err := os.CopyFS(chartDir, os.DirFS(tc.chart)); err != nil {
		t.Fatal(err)
	}
	group := strings.ToLower(tc.kind) + ".compat.rudder.dev"
	gvk := schema.GroupVersionKind{Group: group, Version: "v1", Kind: tc.kind}
	out := filepath.Join(tmp, "out")

	// 1. Scaffold, and apply the CRD and the role.
	args := append([]string{"scaffold", "--chart", chartDir, "--group", group, "--version", "v1", "--kind", tc.kind, "--output", out}, tc.args...)
	code, stdout, stderr := rudderCLI(args...)
	if code != 0 {
		t.Fatalf("scaffold: %d\n%s%s", code, stdout, stderr)
	}
	t.Logf("scaffold:\n%s", stdout)
	plural := strings.ToLower(tc.kind) + "s"
	role := "rudder-" + plural + "." + group
	kubectl(t, "apply", "--server-side", "-k", out)
	t.Cleanup(func() { removeScaffolded(t, role, group) })
	waitEstablished(t, plural+"."+group)
	waitAggregated(t, filepath.Join(out, "role.yaml"))

	// 2. rudder as its ServiceAccount with the scaffolded watches entry, unchanged or as edit
	// changes it.
	if edit != nil {
		editWatches(t, filepath.Join(out, "watches.yaml"), edit)
	}
	ws, err := watches.Load(filepath.Join(out, "watches.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	ns := crtest.NewNamespace(t, k8s, "compat-")
	stop := serveWatches(t, ws, ns)
	kubectl(t, "apply", "-n", ns, "-f", filepath.Join(out, "sample.yaml"))
	return scaffolded{gvk: gvk, ns: ns, name: strings.ToLower(tc.kind) + "-sample", chartDir: chartDir, ws: ws,
		watchesFile: filepath.Join(out, "watches.yaml"), stop: stop}
}

// serveWatches starts rudder as its ServiceAccount with ws, for namespace ns.
func serveWatches(t *testing.T, ws []*watches.Watch, ns string) (stop func()) {
	return startRudderWith(t, asServiceAccount(systemNS, "rudder-manager"), ws, wiring.ManagerOptions{WatchNamespaces: []string{ns},
		SeveralManagers: true, ChartReload: true, ChartDebounce: time.Second})
}

// restart stops s's rudder and starts another with its watches entry changed by edit, as a
// platform team rolls out a new watches.yaml.
func (s *scaffolded) restart(t *testing.T, edit func(entry map[string]any)) {
	t.Helper()
	s.stop()
	editWatches(t, s.watchesFile, edit)
	ws, err := watches.Load(s.watchesFile)
	if err != nil {
		t.Fatal(err)
	}
	s.ws, s.stop = ws, serveWatches(t, ws, s.ns)
}

// editWatches changes the one entry of a watches file with edit.
func editWatches(t *testing.T, file string, edit func(entry map[string]any)) {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var entries []map[string]any
	if err := yaml.Unmarshal(b, &entries); err != nil || len(entries) != 1 {
		t.Fatalf("%s: %v (%d entries)", file, err, len(entries))
	}
	edit(entries[0])
	if b, err = yaml.Marshal(entries); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// gone: the object, or its kind, no longer exists.
func gone(err error) bool {
	var noKind *meta.NoKindMatchError
	return apierrors.IsNotFound(err) || errors.As(err, &noKind) || meta.IsNoMatchError(err)
}

// releaseObjects are the identities of a manifest's objects, as helm.ParseIdentities places them.
func releaseObjects(t *testing.T, manifest, ns string) []*unstructured.Unstructured {
	t.Helper()
	objs, err := helm.ParseIdentities(manifest, ns, k8s.RESTMapper())
	if err != nil {
		t.Fatal(err)
	}
	return objs
}

var chartVersion = regexp.MustCompile(`(?m)^version:\s*(\S+)\s*$`)

// editChartVersion changes the chart's version in place, as a chart author releasing it would.
func editChartVersion(t *testing.T, dir string) {
	t.Helper()
	p := filepath.Join(dir, "Chart.yaml")
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	edited := chartVersion.ReplaceAll(b, []byte("version: ${1}-edit.1"))
	if string(edited) == string(b) {
		t.Fatalf("%s has no version line", p)
	}
	if err := os.WriteFile(p, edited, 0o644); err != nil {
		t.Fatal(err)
	}
}

// waitAggregated waits until rudder's aggregated role holds every rule of a scaffolded role:
// kube-controller-manager copies them in its own time.
func waitAggregated(t *testing.T, roleFile string) {
	t.Helper()
	b, err := os.ReadFile(roleFile)
	if err != nil {
		t.Fatal(err)
	}
	var want rbacv1.ClusterRole
	if err := yaml.UnmarshalStrict(b, &want); err != nil {
		t.Fatal(err)
	}
	crtest.Eventually(t, "rudder-manager aggregates "+want.Name, time.Minute, func(ctx context.Context) (bool, error) {
		var agg rbacv1.ClusterRole
		if err := k8s.Get(ctx, client.ObjectKey{Name: "rudder-manager"}, &agg); err != nil {
			return false, err
		}
		have := make([]string, len(agg.Rules))
		for i, r := range agg.Rules {
			j, _ := json.Marshal(r)
			have[i] = string(j)
		}
		for _, r := range want.Rules {
			j, _ := json.Marshal(r)
			if !slices.Contains(have, string(j)) {
				return false, nil
			}
		}
		return true, nil
	})
}

// restoresGear: a Gear, a kind whose CRD the same release created, has its drift restored.
func restoresGear(t *testing.T, ns, release string) {
	t.Helper()
	gear := schema.GroupVersionKind{Group: "bundle.rudder.dev", Version: "v1", Kind: "Gear"}
	crtest.Update(t, k8s, gear, ns, release, func(u *unstructured.Unstructured) {
		_ = unstructured.SetNestedField(u.Object, int64(99), "spec", "teeth")
	})
	crtest.Eventually(t, "Gear drift restored", time.Minute, func(ctx context.Context) (bool, error) {
		u, err := crtest.Get(ctx, k8s, gear, ns, release)
		if err != nil {
			return false, err
		}
		teeth, _, _ := unstructured.NestedInt64(u.Object, "spec", "teeth")
		return teeth == 12, nil
	})
}
