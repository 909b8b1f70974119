package controllers_test

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rudder-operator/rudder/internal/chartsource"
	"github.com/rudder-operator/rudder/internal/chartsource/chartsourcetest"
	"github.com/rudder-operator/rudder/internal/crtest"
	"github.com/rudder-operator/rudder/internal/testcluster"
	"github.com/rudder-operator/rudder/internal/watches"
	"github.com/rudder-operator/rudder/internal/wiring"
)

var (
	cluster  *testcluster.Cluster
	k8s      client.Client // uncached: assertions see the API server, not rudder's cache
	charts   *chartsource.Source
	chartDir string // a private copy of charts/ and testdata/charts, editable by tests
	root     string
	// passes counts the passes of the rudder the suite runs, per CR.
	passes = crtest.NewPassCounter()
)

var (
	widgetGVK = schema.GroupVersionKind{Group: "test.rudder.dev", Version: "v1", Kind: "Widget"}
	gadgetGVK = schema.GroupVersionKind{Group: "test.rudder.dev", Version: "v1", Kind: "Gadget"}
	gizmoGVK  = schema.GroupVersionKind{Group: "test.rudder.dev", Version: "v1", Kind: "Gizmo"}
)

// hookClock is the built-in hooks' clock: real time, which a test may move forward (At's
// schedule). The reconcilers keep the real clock.
var hookClock = &shiftedClock{}

// shiftedClock is the real clock plus an offset that only grows.
type shiftedClock struct{ offset atomic.Int64 }

func (c *shiftedClock) Now() time.Time                  { return time.Now().Add(time.Duration(c.offset.Load())) }
func (c *shiftedClock) Since(t time.Time) time.Duration { return c.Now().Sub(t) }
func (c *shiftedClock) Step(d time.Duration)            { c.offset.Add(int64(d)) }

// Tests that read a kind's metrics or edit charts are not
// parallel: Go runs them first, one at a time, so that nothing else moves their counters. The
// others each work in a namespace of their own and run in parallel after them.
func TestMain(m *testing.M) {
	os.Exit(crtest.Main(m, crtest.Suite{
		Scheme: wiring.Scheme(),
		Options: func(o *testcluster.Options, root string) {
			o.CRDDirectoryPaths = []string{filepath.Join(root, "config/crd/bases"), "testdata/crds"}
		},
		Setup: setup,
	}))
}

// setup runs rudder in this process, on a private copy of the charts, with testWatches.
func setup(e *crtest.Env) (func() error, error) {
	cluster, k8s, root = e.Cluster, e.Client, e.Root
	tmp, err := os.MkdirTemp("", "rudder-charts-")
	if err != nil {
		return nil, err
	}
	chartDir = tmp
	for _, src := range []string{filepath.Join(root, "charts") + "/.", "testdata/charts/."} {
		if out, err := exec.Command("cp", "-r", src, tmp).CombinedOutput(); err != nil {
			return nil, fmt.Errorf("%w: %s", err, out)
		}
	}
	// gizmo, valuesgizmo and orderapp: the widget chart laid out as a ConfigMap volume (see
	// swapChart).
	for _, vol := range []string{"gizmo", "valuesgizmo", "orderapp"} {
		if err := swapChart(filepath.Join(tmp, vol), filepath.Join(tmp, "widget"), nil); err != nil {
			return nil, err
		}
	}
	// orderdb: the waited chart as a ConfigMap volume, which TestDependsOnChartEdit edits.
	if err := swapChart(filepath.Join(tmp, "orderdb"), filepath.Join(tmp, "waited"), nil); err != nil {
		return nil, err
	}
	// rollout, paused and gated: the day2 chart as ConfigMap volumes, which TestRolloutInWaves,
	// TestRolloutWaitsForItsPreview and TestRolloutPromotedAndAborted edit.
	for _, vol := range []string{"rollout", "paused", "gated"} {
		if err := swapChart(filepath.Join(tmp, vol), filepath.Join(tmp, "day2"), nil); err != nil {
			return nil, err
		}
	}
	// crdskip and crdreplace: a chart whose crds/ a test edits (see gearChart).
	for _, vol := range []string{"crdskip", "crdreplace"} {
		if err := chartsourcetest.PublishAtomic(filepath.Join(tmp, vol), gearChart(vol, 1)); err != nil {
			return nil, err
		}
	}
	wf := filepath.Join(tmp, "watches.yaml")
	if err := os.WriteFile(wf, []byte(testWatches), 0o644); err != nil {
		return nil, err
	}
	ws, err := watches.Load(wf)
	if err != nil {
		return nil, err
	}
	mgr, src, err := wiring.NewManager(cluster.Config, wiring.ManagerOptions{
		Watches: ws, ChartReload: true, ChartDebounce: 300 * time.Millisecond, ChartRescan: 0,
		MaxConcurrentReconciles: 4, Hooks: wiring.BuiltinHooks(hookClock), OnPass: passes.Observe,
	})
	if err != nil {
		return nil, fmt.Errorf("setting up rudder: %w", err)
	}
	charts = src
	stop := crtest.StartManager(mgr)
	return func() error { return errors.Join(stop(), os.RemoveAll(tmp)) }, nil
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
- {group: test.rudder.dev, version: v1, kind: LookupProbe, chart: lookupescape, allowReads: [Secret/source]}
- {group: test.rudder.dev, version: v1, kind: TenantApp, chart: tenantapp, serviceAccountName: deployer}
- {group: test.rudder.dev, version: v1, kind: HistoryProbe, chart: widget, maxHistory: 3}
- {group: test.rudder.dev, version: v1, kind: TenantBox, chart: tenantbox, allowRoles: [Role/cr-author]}
- {group: test.rudder.dev, version: v1, kind: WedgeBox, chart: tenantbox, limits: {actionTimeout: 3m}}
- {group: test.rudder.dev, version: v1, kind: RoleBox, chart: tenantbox, allowClusterScoped: [ClusterRole], allowRules: [{apiGroups: [""], resources: [configmaps], verbs: [get]}]}
- {group: test.rudder.dev, version: v1, kind: CRDBox, chart: extras, allowClusterScoped: [CustomResourceDefinition]}
- {group: test.rudder.dev, version: v1, kind: TestProbe, chart: tested, test: {enable: true}}
- {group: test.rudder.dev, version: v1, kind: TestRollback, chart: tested, test: {enable: true, onFailure: rollback, timeout: 1m}}
- {group: test.rudder.dev, version: v1, kind: PeriodicProbe, chart: tested, test: {enable: true, interval: 2s, timeout: 5s, onFailure: rollback}}
- group: test.rudder.dev
  version: v1
  kind: ValuesProbe
  chart: widget
  valuesFrom:
  - kind: Secret
    name: '{{ $n := printf "%s-db" .metadata.name }}{{ with .metadata.annotations }}{{ with index . "db" }}{{ $n = . }}{{ end }}{{ end }}{{ $n }}'
  - {kind: ConfigMap, name: '{{ .metadata.name }}-opt', optional: true}
  - {kind: Secret, name: '{{ .metadata.name }}-msg', valuesKey: message, targetPath: message, optional: true}
- {group: test.rudder.dev, version: v1, kind: NudgeProbe, chart: widget}
- {group: test.rudder.dev, version: v1, kind: LeakProbe, chart: leaky}
- {group: test.rudder.dev, version: v1, kind: TakeProbe, chart: widget, install: {takeOwnership: true}}
- {group: test.rudder.dev, version: v1, kind: ValuesGizmo, chart: valuesgizmo, valuesFrom: [{kind: Secret, name: '{{ .metadata.name }}-db'}]}
- group: test.rudder.dev
  version: v1
  kind: DriftIgnore
  chart: day2
  driftDetection: {ignore: [{paths: [/spec/replicas], target: {kind: Deployment}}]}
- {group: test.rudder.dev, version: v1, kind: DriftWarn, chart: day2, driftDetection: {mode: warn}}
- group: test.rudder.dev
  version: v1
  kind: SSAProbe
  chart: day2
  install: {serverSideApply: true}
  driftDetection: {ignore: [{paths: [/spec/replicas], target: {kind: Deployment}}]}
- {group: test.rudder.dev, version: v1, kind: DepDb, chart: waited}
- {group: test.rudder.dev, version: v1, kind: DepApp, chart: widget, dependsOn: {kinds: [{kind: DepDb}, {kind: DepApp}, {kind: Gadget, readyExpr: "has(metadata.labels) && 'ready' in metadata.labels"}], allowNamespaces: [dep-shared]}}
- {group: test.rudder.dev, version: v1, kind: OrderDb, chart: orderdb, rollout: {waves: [{count: 1}], settle: 1s, healthTimeout: 10m, onHalt: hold}}
- {group: test.rudder.dev, version: v1, kind: OrderApp, chart: orderapp, dependsOn: {kinds: [{kind: OrderDb}]}}
- {group: test.rudder.dev, version: v1, kind: WaitAll, chart: waited, wait: {enable: true}, limits: {actionTimeout: 10m}}
- {group: test.rudder.dev, version: v1, kind: WaitScoped, chart: waited, wait: {enable: true, kinds: [ConfigMap]}, limits: {actionTimeout: 10m}}
- {group: test.rudder.dev, version: v1, kind: SSAReplace, chart: day2, install: {serverSideApply: true}, upgrade: {force: true}}
- {group: test.rudder.dev, version: v1, kind: SSAMove, chart: day2, upgrade: {serverSideApply: true}}
- {group: test.rudder.dev, version: v1, kind: SSAConflict, chart: day2, install: {serverSideApply: true}, driftDetection: {mode: disabled}}
- {group: test.rudder.dev, version: v1, kind: SSAForce, chart: day2, install: {serverSideApply: true}, upgrade: {forceConflicts: true}, driftDetection: {mode: disabled}}
- {group: test.rudder.dev, version: v1, kind: ForceProbe, chart: day2, upgrade: {force: true}}
- {group: test.rudder.dev, version: v1, kind: Day2Probe, chart: day2}
- {group: test.rudder.dev, version: v1, kind: Day2CLI, chart: day2}
- {group: test.rudder.dev, version: v1, kind: OldSchema, chart: widget}
- {group: test.rudder.dev, version: v1, kind: RetryProbe, chart: day2, remediation: {retries: 3}}
- {group: test.rudder.dev, version: v1, kind: CRDSkip, chart: crdskip, allowClusterScoped: [CustomResourceDefinition]}
- group: test.rudder.dev
  version: v1
  kind: CRDReplace
  chart: crdreplace
  allowClusterScoped: [CustomResourceDefinition]
  crds: {upgrade: CreateReplace}
- group: test.rudder.dev
  version: v1
  kind: RolloutProbe
  chart: rollout
  rollout: {waves: [{count: 1}, {percent: 25}], settle: 1s, healthTimeout: 20s, maxFailures: 0, onHalt: rollback}
- {group: test.rudder.dev, version: v1, kind: PausedProbe, chart: paused, rollout: {waves: [{count: 1}], paused: true}}
- {group: test.rudder.dev, version: v1, kind: GatedProbe, chart: gated, rollout: {waves: [{count: 1}, {count: 2}], settle: 1h, healthTimeout: 5m, onHalt: hold}}
- group: test.rudder.dev
  version: v1
  kind: ValuesTenant
  chart: widget
  serviceAccountName: deployer
  valuesFrom: [{kind: Secret, name: '{{ .metadata.name }}-db'}]
`

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
