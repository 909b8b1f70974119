package controllers_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/cli"
	"helm.sh/helm/v3/pkg/release"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"go.uber.org/zap/zapcore"

	"github.com/rudder-operator/rudder/internal/chartsource"
	"github.com/rudder-operator/rudder/internal/chartsource/chartsourcetest"
	"github.com/rudder-operator/rudder/internal/crtest"
	"github.com/rudder-operator/rudder/internal/operator"
	"github.com/rudder-operator/rudder/internal/testcluster"
	"github.com/rudder-operator/rudder/internal/watches"
)

var (
	cluster  *testcluster.Cluster
	k8s      client.Client // uncached: assertions see the API server, not rudder's cache
	charts   *chartsource.Source
	chartDir string // a private copy of charts/ and testdata/charts, editable by tests
	root     string
)

var (
	widgetGVK = schema.GroupVersionKind{Group: "test.rudder.dev", Version: "v1", Kind: "Widget"}
	gadgetGVK = schema.GroupVersionKind{Group: "test.rudder.dev", Version: "v1", Kind: "Gadget"}
	gizmoGVK  = schema.GroupVersionKind{Group: "test.rudder.dev", Version: "v1", Kind: "Gizmo"}
)

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	if testcluster.ShortMode("^TestEnsureWatchSharesOneStart$") {
		return m.Run()
	}
	ctrl.SetLogger(zap.New(zap.UseDevMode(true), zap.Level(zapcore.Level(zapLevel()))))
	var err error
	if root, err = testcluster.RepoRoot(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	opts := testcluster.All()
	opts.CRDDirectoryPaths = []string{filepath.Join(root, "config/crd/bases"), "testdata/crds"}
	c, err := testcluster.Start(context.Background(), opts)
	if err != nil {
		fmt.Fprintln(os.Stderr, "starting the test control plane:", err)
		return 1
	}
	cluster = c
	defer func() {
		if err := c.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, err)
		}
	}()
	if k8s, err = client.New(c.ClientConfig(), client.Options{Scheme: operator.Scheme()}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}

	tmp, err := os.MkdirTemp("", "rudder-charts-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(tmp)
	chartDir = tmp
	for _, src := range []string{filepath.Join(root, "charts") + "/.", "testdata/charts/."} {
		if out, err := exec.Command("cp", "-r", src, tmp).CombinedOutput(); err != nil {
			fmt.Fprintln(os.Stderr, string(out), err)
			return 1
		}
	}
	// gizmo: the widget chart laid out as a ConfigMap volume (see swapChart).
	if err := swapChart(filepath.Join(tmp, "gizmo"), filepath.Join(tmp, "widget"), nil); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	wf := filepath.Join(tmp, "watches.yaml")
	if err := os.WriteFile(wf, []byte(testWatches), 0o644); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	ws, err := watches.Load(wf)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	mgr, src, err := operator.New(c.Config, operator.Options{
		Watches: ws, ChartReload: true, ChartDebounce: 300 * time.Millisecond, ChartRescan: 0,
		MaxConcurrentReconciles: 4,
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "setting up rudder:", err)
		return 1
	}
	charts = src
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	code := m.Run()
	cancel()
	if err := <-done; err != nil {
		fmt.Fprintln(os.Stderr, "manager:", err)
		code = 1
	}
	if code != 0 {
		c.DumpLogs(os.Stderr)
	}
	return code
}

func zapLevel() int8 {
	if os.Getenv("RUDDER_TEST_VERBOSE") != "" {
		return -2
	}
	return 0
}

// Widget and Gadget are generic kinds with no Go code; both use the widget test chart, so a
// Widget and a Gadget of the same name collide on one release name.
const testWatches = `
- {group: test.rudder.dev, version: v1, kind: Widget, chart: widget}
- {group: test.rudder.dev, version: v1, kind: Gadget, chart: widget}
- {group: test.rudder.dev, version: v1, kind: Gizmo, chart: gizmo}
- {group: operator.example.com, version: v1alpha1, kind: NginxOperator, chart: nginx}
- {group: cnat.ishankhare.dev, version: v1alpha1, kind: At, chart: at}
- {group: apps.sunstrider.cn, version: v1, kind: Application, chart: application}
- {group: test.rudder.dev, version: v1, kind: HookProbe, chart: hookescape}
- {group: test.rudder.dev, version: v1, kind: CRDProbe, chart: crdchart}
- {group: test.rudder.dev, version: v1, kind: CRDAllowed, chart: crdchart, allowClusterScoped: [CustomResourceDefinition]}
- {group: test.rudder.dev, version: v1, kind: LookupProbe, chart: lookupescape}
- {group: test.rudder.dev, version: v1, kind: TenantApp, chart: tenantapp, serviceAccountName: deployer}
- {group: test.rudder.dev, version: v1, kind: HistoryProbe, chart: widget, maxHistory: 3}
`

func newNamespace(t *testing.T) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "t-"}}
	if err := k8s.Create(context.Background(), ns); err != nil {
		t.Fatal(err)
	}
	return ns.Name
}

func eventually(t *testing.T, what string, timeout time.Duration, cond func(ctx context.Context) (bool, error)) {
	t.Helper()
	crtest.Eventually(t, what, timeout, cond)
}

// consistently fails if cond turns false within d.
func consistently(t *testing.T, what string, d time.Duration, cond func(ctx context.Context) (bool, error)) {
	t.Helper()
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		ok, err := cond(context.Background())
		if err != nil || !ok {
			t.Fatalf("%s stopped holding: ok=%v err=%v", what, ok, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func newCR(gvk schema.GroupVersionKind, ns, name string, spec map[string]any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"spec": spec}}
	u.SetGroupVersionKind(gvk)
	u.SetNamespace(ns)
	u.SetName(name)
	return u
}

func get(ctx context.Context, gvk schema.GroupVersionKind, ns, name string) (*unstructured.Unstructured, error) {
	return crtest.Get(ctx, k8s, gvk, ns, name)
}

func condition(u *unstructured.Unstructured, typ string) *metav1.Condition {
	return crtest.Condition(u, typ)
}

func waitCondition(t *testing.T, gvk schema.GroupVersionKind, ns, name, typ string, status metav1.ConditionStatus, reason string, timeout time.Duration) *unstructured.Unstructured {
	t.Helper()
	return crtest.WaitCondition(t, k8s, gvk, ns, name, typ, status, reason, timeout)
}

func helmConfig(t *testing.T, ns string) *action.Configuration {
	t.Helper()
	settings := cli.New()
	settings.KubeConfig = cluster.Kubeconfig
	settings.SetNamespace(ns)
	cfg := new(action.Configuration)
	if err := cfg.Init(settings.RESTClientGetter(), ns, "secret", func(string, ...any) {}); err != nil {
		t.Fatal(err)
	}
	return cfg
}

func history(t *testing.T, ns, name string) []*release.Release {
	t.Helper()
	h, err := helmConfig(t, ns).Releases.History(name)
	if err != nil && !strings.Contains(err.Error(), "not found") {
		t.Fatal(err)
	}
	return h
}

// helmCLI runs bin/helm against the test cluster.
func helmCLI(t *testing.T, args ...string) (string, error) {
	t.Helper()
	out, err := cluster.Command("helm", args...).CombinedOutput()
	return string(out), err
}

func kubectl(t *testing.T, args ...string) (string, error) {
	t.Helper()
	out, err := cluster.Command("kubectl", args...).CombinedOutput()
	return string(out), err
}

// swapChart publishes the chart in src, with edit (relative path → content) applied, into vol
// the way the kubelet updates a ConfigMap volume.
func swapChart(vol, src string, edit map[string]string) error {
	files, err := chartsourcetest.ReadDir(src)
	if err != nil {
		return err
	}
	for name, content := range edit {
		files[name] = content
	}
	return chartsourcetest.PublishAtomic(vol, files)
}
