package controllers

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	chart "helm.sh/helm/v4/pkg/chart/v2"
	"helm.sh/helm/v4/pkg/release/common"
	release "helm.sh/helm/v4/pkg/release/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/events"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	rstatus "github.com/rudder-operator/rudder/api/status"
	"github.com/rudder-operator/rudder/internal/chartsource"
	"github.com/rudder-operator/rudder/internal/crtest"
	"github.com/rudder-operator/rudder/internal/guard"
	"github.com/rudder-operator/rudder/internal/helm"
	"github.com/rudder-operator/rudder/internal/hook"
	"github.com/rudder-operator/rudder/internal/machine"
	"github.com/rudder-operator/rudder/internal/records"
	"github.com/rudder-operator/rudder/internal/watches"
)

// The decision table of a pass: release state × action result → Helm calls, conditions,
// Events and Result. A fake Helm and controller-runtime's fake client stand in for the
// cluster; every behaviour here is also exercised against a real control plane by the
// integration tests of this package.

var unitGVK = schema.GroupVersionKind{Group: "unit.rudder.dev", Version: "v1", Kind: "Widget"}

const unitUID = types.UID("uid-1")

type harness struct {
	t     *testing.T
	r     *Reconciler
	c     client.Client
	helm  *fakeHelm
	rec   *events.FakeRecorder
	clock *clocktesting.FakeClock
	key   types.NamespacedName
	// behind serves the passes' reads of the CR: from c, or as a cache that is behind shows it.
	behind *behindCache
	// chartDigest and valuesDigest are what the CR's spec and chart give (label forms).
	chartDigest, valuesDigest string
}

type harnessOpts struct {
	watch       string // extra watches.yaml fields for the Widget watch
	chart       string // the Widget watch's chart in testdata/charts (default widget)
	annotations map[string]string
	labels      map[string]string
	// carried: the shard selector's keys (sharded reconciler).
	carried []string
	status  map[string]any
	pre     hook.PreRelease
	post    hook.PostRelease
	// sources is what the CR's valuesFrom sources hold, by name (absent: missing);
	// sourcesErr fails reading them.
	sources    map[string]string
	sourcesErr error
}

// fakeSources serves valuesFrom sources from memory.
type fakeSources struct {
	contents map[string]string
	err      error
}

func (f *fakeSources) Read(_ context.Context, _ helm.Scope, srcs []watches.Source, _ machine.SourceUser) ([][]byte, error) {
	if f.err != nil {
		return nil, f.err
	}
	out := make([][]byte, len(srcs))
	for i, s := range srcs {
		if c, ok := f.contents[s.Name]; ok {
			out[i] = []byte(c)
		}
	}
	return out, nil
}

func (f *fakeSources) Forget(machine.SourceUser) {}

func newHarness(t *testing.T, o harnessOpts) *harness {
	t.Helper()
	if o.chart == "" {
		o.chart = "widget"
	}
	ws, err := watches.Parse([]byte("- group: unit.rudder.dev\n  version: v1\n  kind: Widget\n  chart: charts/"+o.chart+"\n"+o.watch),
		"testdata", func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	charts := chartsource.New(chartsource.Options{})
	if err := charts.Add(ws[0].ChartPath(), nil); err != nil {
		t.Fatal(err)
	}
	spec := map[string]any{"message": "hello", "replicas": int64(1)}
	cr := &unstructured.Unstructured{Object: map[string]any{"spec": spec}}
	cr.SetGroupVersionKind(unitGVK)
	cr.SetNamespace("ns")
	cr.SetName("w")
	cr.SetUID(unitUID)
	cr.SetGeneration(1)
	cr.SetAnnotations(o.annotations)
	cr.SetLabels(o.labels)
	if o.status != nil {
		// A CR with rudder's status was taken on by a pass: it holds rudder's finalizer.
		cr.Object["status"] = o.status
		cr.SetFinalizers([]string{Finalizer})
	}
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	// The release's one object exists and is ready unless a case deletes it.
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "w"}}
	c := fake.NewClientBuilder().WithScheme(scheme).WithRESTMapper(helm.StaticMapper()).
		WithObjects(cr, cm).WithStatusSubresource(cr).
		WithIndex(records.ReleaseSecret(), records.ReleaseSecretIndex, records.ReleaseNameOf).Build()
	h := &harness{t: t, c: c, key: types.NamespacedName{Namespace: "ns", Name: "w"},
		rec:   events.NewFakeRecorder(100),
		clock: clocktesting.NewFakeClock(time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)),
		helm:  newFakeHelm(c, "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: w\n"),
	}
	hooks := hook.NewRegistry()
	if o.pre != nil {
		hooks.AddPreRelease(unitGVK, o.pre)
	}
	if o.post != nil {
		hooks.AddPostRelease(unitGVK, o.post)
	}
	h.behind = &behindCache{Client: c}
	if h.r, err = New(Options{Watch: ws[0], Charts: charts, Helm: h.helm.releases(), Hooks: hooks, Client: h.behind, APIReader: c,
		Sources:  &fakeSources{contents: o.sources, err: o.sourcesErr},
		Recorder: h.rec, Clock: h.clock, ReconcilePeriod: 10 * time.Minute, Carried: o.carried}); err != nil {
		t.Fatal(err)
	}
	cs, _ := charts.Get(ws[0].ChartPath())
	h.chartDigest = records.LabelDigest(cs.Current.Digest)
	if h.valuesDigest, err = records.ValuesDigest(spec); err != nil {
		t.Fatal(err)
	}
	return h
}

// seed stores a revision of the release as it would be found. current: made from the CR's
// spec and chart (else from older values); madeAs: the revision whose labels it carries (0:
// its own, as rudder's installs and upgrades).
func (h *harness) seed(status common.Status, current bool, madeAs int, owner types.UID) *release.Release {
	rel := h.record(status, current, madeAs, owner)
	h.helm.Seed(rel)
	return rel
}

// record is the next revision of the release as seed stores it.
func (h *harness) record(status common.Status, current bool, madeAs int, owner types.UID) *release.Release {
	version := len(h.helm.Stored("ns", "w")) + 1
	if madeAs == 0 {
		madeAs = version
	}
	vd := h.valuesDigest
	if !current {
		vd = "older"
	}
	rel := &release.Release{Name: "w", Namespace: "ns", Version: version, Manifest: h.helm.Manifest,
		Chart: &chart.Chart{Metadata: &chart.Metadata{Name: "widget", Version: "0.1.0"}},
		Labels: map[string]string{records.LabelOwnerUID: string(owner), records.LabelOwnerKind: records.KindLabel(unitGVK.GroupKind()),
			records.LabelChartDigest: h.chartDigest, records.LabelValuesDigest: vd, records.LabelRevision: strconv.Itoa(madeAs)},
		Info: &release.Info{Status: status, Description: "seeded", LastDeployed: h.clock.Now()}}
	return rel
}

// refused is the error of an install or upgrade the confinement refuses before Helm stores
// anything.
func refused() error {
	return &guard.ConfinementError{Violations: []guard.Violation{{Kind: "ConfigMap"}}}
}

// seedManualRollback stores a history whose newest revision is a rollback made with Helm's
// CLI to revision 1, from revision 2 that rudder made from the CR as it is.
func seedManualRollback(h *harness) {
	h.seed(common.StatusSuperseded, false, 0, unitUID)
	h.seedApplied(common.StatusSuperseded)
	h.seed(common.StatusDeployed, false, 1, unitUID)
}

// seedApplied stores the next revision as rudder makes it from the CR as it is: the CR's
// values, its facts saying it was made from generation 1 and the watch's chart.
func (h *harness) seedApplied(status common.Status) *release.Release {
	rel := h.record(status, true, 0, unitUID)
	maps.Copy(rel.Labels, records.Facts{Applied: &records.Applied{Generation: 1, ChartDigest: h.chartDigest}}.Labels(rel.Version))
	h.helm.Seed(rel)
	return rel
}

// seedKept stores a failed install as rudder keeps one (records.Head.Kept): its objects
// removed, its record failed, carrying as its facts the failure of the CR's (chart, values)
// when current, else of older values.
func (h *harness) seedKept(current bool) *release.Release {
	rel := h.failedInstall(current, common.StatusFailed)
	rel.Labels[records.LabelObjectsRemoved] = strconv.Itoa(rel.Version)
	h.helm.Seed(rel)
	return rel
}

// seedKeptFailure stores the CR's failed install as rudder keeps it (see seedKept) after it
// failed n times, the last time ago.
func (h *harness) seedKeptFailure(n int, ago time.Duration) *release.Release {
	rel := h.failedInstall(true, common.StatusFailed)
	f := records.FactsOf(rel.Labels)
	f.Failed.Count, f.Failed.At = n, h.clock.Now().Add(-ago)
	maps.Copy(rel.Labels, f.Labels(rel.Version))
	rel.Labels[records.LabelObjectsRemoved] = strconv.Itoa(rel.Version)
	h.helm.Seed(rel)
	return rel
}

// seedUnkept stores a failed install whose objects an uninstall removed, keeping its history,
// before its record was marked kept (records.Head.Unkept): a keep that died in between.
func (h *harness) seedUnkept() *release.Release {
	rel := h.failedInstall(true, common.StatusUninstalled)
	h.helm.Seed(rel)
	return rel
}

// failedInstall is the next revision as a failed install of rudder's leaves it, its failure
// among its facts, in status.
func (h *harness) failedInstall(current bool, status common.Status) *release.Release {
	rel := h.record(status, current, 0, unitUID)
	failed := records.Failure{ChartDigest: rel.Labels[records.LabelChartDigest], ValuesDigest: rel.Labels[records.LabelValuesDigest],
		Cause: rstatus.ReasonInstallFailed, Count: 1, At: h.clock.Now().Add(-time.Hour)}
	maps.Copy(rel.Labels, records.Facts{Failed: &failed}.Labels(rel.Version))
	rel.Labels[records.LabelAction] = string(records.ActionInstall)
	rel.Info.Description = `Release "w" failed: boom`
	return rel
}

// pass runs one Reconcile.
func (h *harness) pass() (reconcile.Result, error) {
	h.t.Helper()
	return h.r.Reconcile(context.Background(), reconcile.Request{NamespacedName: h.key})
}

func (h *harness) cr() *unstructured.Unstructured {
	h.t.Helper()
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(unitGVK)
	if err := h.c.Get(context.Background(), h.key, u); err != nil {
		h.t.Fatal(err)
	}
	return u
}

// conds renders the CR's conditions as "Type=Status/Reason".
func (h *harness) conds(types ...string) []string {
	h.t.Helper()
	cs := rstatus.ConditionsOf(h.cr())
	out := make([]string, 0, len(types))
	for _, typ := range types {
		c := meta.FindStatusCondition(cs, typ)
		if c == nil {
			out = append(out, typ+"=none")
			continue
		}
		out = append(out, typ+"="+string(c.Status)+"/"+c.Reason)
	}
	return out
}

// eventReasons drains the recorded Events into "Type Reason".
func (h *harness) eventReasons() []string {
	var out []string
	for {
		select {
		case e := <-h.rec.Events:
			f := strings.Fields(e)
			out = append(out, f[0]+" "+f[1])
		default:
			return out
		}
	}
}

// outcomeOf classifies a Reconcile result as controller-runtime acts on it.
func outcomeOf(res reconcile.Result, err error) string {
	switch {
	case errors.Is(err, reconcile.TerminalError(nil)):
		return "terminal"
	case err != nil:
		return "retry"
	case res.RequeueAfter > 0:
		return "requeue"
	}
	return "done"
}

func TestPassDecisionTable(t *testing.T) {
	t.Parallel()
	boom := errors.New("boom")
	cases := []struct {
		name  string
		opts  harnessOpts
		setup func(h *harness)
		// want
		// calls are the spy's: storage reads and actions, in order (a rollback returns the
		// revision it made, read inside the action as the newest, and is one call).
		calls  []string
		conds  []string // Released, Ready, Reconciling, Stalled
		events []string
		result string
		// waits: the pass waits for something else and completes nothing (no
		// observedGeneration).
		waits bool
	}{{
		name:   "absent: install",
		calls:  []string{"Install"},
		conds:  []string{"Released=True/InstallSucceeded", "Ready=True/ObjectsReady", "Reconciling=False/ObjectsReady", "Stalled=False/InstallSucceeded"},
		events: []string{"Normal InstallSucceeded"},
		result: "requeue",
	}, {
		name:   "in sync in the cache: only the manifest read, once per process",
		setup:  func(h *harness) { h.seed(common.StatusDeployed, true, 0, unitUID) },
		calls:  []string{"Last"},
		conds:  []string{"Released=True/UpToDate", "Ready=True/ObjectsReady", "Reconciling=False/ObjectsReady", "Stalled=False/UpToDate"},
		result: "requeue",
	}, {
		name: "in sync, an older revision still deployed (a lost update): superseded",
		setup: func(h *harness) {
			h.seed(common.StatusDeployed, false, 0, unitUID)
			h.seed(common.StatusDeployed, true, 0, unitUID)
		},
		calls:  []string{"Supersede", "Last"},
		conds:  []string{"Released=True/UpToDate", "Ready=True/ObjectsReady", "Reconciling=False/ObjectsReady", "Stalled=False/UpToDate"},
		events: []string{"Normal Superseded"},
		result: "requeue",
	}, {
		name:   "objects not there yet: progressing",
		setup:  func(h *harness) { h.seed(common.StatusDeployed, true, 0, unitUID); h.deleteObject() },
		calls:  []string{"Last"},
		conds:  []string{"Released=True/UpToDate", "Ready=False/Progressing", "Reconciling=True/Progressing", "Stalled=False/UpToDate"},
		result: "requeue",
	}, {
		name:   "out of sync: upgrade",
		setup:  func(h *harness) { h.seed(common.StatusDeployed, false, 0, unitUID) },
		calls:  []string{"Last", "Upgrade"},
		conds:  []string{"Released=True/UpgradeSucceeded", "Ready=True/ObjectsReady", "Reconciling=False/ObjectsReady", "Stalled=False/UpgradeSucceeded"},
		events: []string{"Normal UpgradeSucceeded"},
		result: "requeue",
	}, {
		name:   "install, its objects known from Helm's client: manifest not read",
		setup:  func(h *harness) { h.knownObjects() },
		calls:  []string{"Install"},
		conds:  []string{"Released=True/InstallSucceeded", "Ready=True/ObjectsReady", "Reconciling=False/ObjectsReady", "Stalled=False/InstallSucceeded"},
		events: []string{"Normal InstallSucceeded"},
		result: "requeue",
	}, {
		name:   "upgrade, its objects known from Helm's client: manifest not read",
		setup:  func(h *harness) { h.seed(common.StatusDeployed, false, 0, unitUID); h.knownObjects() },
		calls:  []string{"Last", "Upgrade"},
		conds:  []string{"Released=True/UpgradeSucceeded", "Ready=True/ObjectsReady", "Reconciling=False/ObjectsReady", "Stalled=False/UpgradeSucceeded"},
		events: []string{"Normal UpgradeSucceeded"},
		result: "requeue",
	}, {
		name: "upgrade fails: rolled back, held back",
		setup: func(h *harness) {
			h.seed(common.StatusDeployed, false, 0, unitUID)
			h.helm.upgradeErr, h.helm.stores = boom, true
		},
		calls:  []string{"Last", "Upgrade", "Last", "LastDeployed", "Rollback 1"},
		conds:  []string{"Released=False/RolledBack", "Ready=False/UpgradeFailed", "Reconciling=False/UpgradeFailed", "Stalled=True/UpgradeFailed"},
		events: []string{"Warning UpgradeFailed", "Normal RolledBack"},
		result: "terminal",
	}, {
		name: "upgrade fails, then reading the history fails: retried (the next pass rolls back)",
		setup: func(h *harness) {
			h.seed(common.StatusDeployed, false, 0, unitUID)
			h.helm.upgradeErr, h.helm.stores = boom, true
			h.helm.failNth, h.helm.nthErr = map[string]int{"Last": 2}, errors.New("etcdserver: leader changed")
		},
		calls:  []string{"Last", "Upgrade", "Last"},
		conds:  []string{"Released=none", "Ready=False/UpgradeFailed", "Reconciling=True/UpgradeFailed", "Stalled=False/UpgradeFailed"},
		events: []string{"Warning UpgradeFailed"},
		result: "retry",
	}, {
		name: "upgrade fails as the API server became unavailable: retried, not rolled back",
		setup: func(h *harness) {
			h.seed(common.StatusDeployed, false, 0, unitUID)
			h.helm.upgradeErr, h.helm.stores = &helm.UnavailableError{Err: errors.New(`cannot patch "w" with kind ConfigMap: rpc error: code = Unavailable`)}, true
		},
		calls:  []string{"Last", "Upgrade"},
		conds:  []string{"Released=none", "Ready=False/UpgradeFailed", "Reconciling=True/UpgradeFailed", "Stalled=False/UpgradeFailed"},
		result: "retry",
	}, {
		name: "upgrade fails, rollback off",
		opts: harnessOpts{watch: "  rollbackOnFailure: false\n"},
		setup: func(h *harness) {
			h.seed(common.StatusDeployed, false, 0, unitUID)
			h.helm.upgradeErr, h.helm.stores = boom, true
		},
		calls:  []string{"Last", "Upgrade", "Last"},
		conds:  []string{"Released=False/UpgradeFailed", "Ready=False/UpgradeFailed", "Reconciling=False/UpgradeFailed", "Stalled=True/UpgradeFailed"},
		events: []string{"Warning UpgradeFailed"},
		result: "terminal",
	}, {
		name:   "install fails: its objects removed, its record kept, held back",
		setup:  func(h *harness) { h.helm.installErr, h.helm.stores = boom, true },
		calls:  []string{"Install", "Last", "KeepFailed"},
		conds:  []string{"Released=False/InstallFailed", "Ready=False/InstallFailed", "Reconciling=False/InstallFailed", "Stalled=True/InstallFailed"},
		events: []string{"Warning InstallFailed"},
		result: "terminal",
	}, {
		name: "install refused by confinement: chart invalid",
		setup: func(h *harness) {
			h.helm.installErr = &guard.ConfinementError{Violations: []guard.Violation{{Kind: "ConfigMap"}}}
		},
		calls:  []string{"Install", "Last"},
		conds:  []string{"Released=False/ChartInvalid", "Ready=False/ChartInvalid", "Reconciling=False/ChartInvalid", "Stalled=True/ChartInvalid"},
		events: []string{"Warning ChartInvalid"},
		result: "terminal",
	}, {
		name:   "install transient: retried",
		setup:  func(h *harness) { h.helm.installErr = apierrors.NewServiceUnavailable("etcd leader changed") },
		calls:  []string{"Install"},
		conds:  []string{"Released=none", "Ready=False/InstallFailed", "Reconciling=True/InstallFailed", "Stalled=False/InstallFailed"},
		result: "retry",
	}, {
		name: "install forbidden: retried",
		setup: func(h *harness) {
			h.helm.installErr = unauthorized("configmaps", "w")
		},
		calls:  []string{"Install", "Last"},
		conds:  []string{"Released=False/Forbidden", "Ready=False/Forbidden", "Reconciling=True/Forbidden", "Stalled=False/Forbidden"},
		events: []string{"Warning Forbidden"},
		result: "retry",
	}, {
		name: "install forbidden, and the release unreadable too: still Forbidden, retried",
		setup: func(h *harness) {
			h.helm.installErr = unauthorized("services", "w")
			h.helm.lastErr = unauthorized("secrets", "")
		},
		calls:  []string{"Install", "Last"},
		conds:  []string{"Released=False/Forbidden", "Ready=False/Forbidden", "Reconciling=True/Forbidden", "Stalled=False/Forbidden"},
		events: []string{"Warning Forbidden"},
		result: "retry",
	}, {
		name: "upgrade refused by confinement: chart invalid, nothing to roll back",
		setup: func(h *harness) {
			h.seed(common.StatusDeployed, false, 0, unitUID)
			h.helm.upgradeErr = &guard.ConfinementError{Violations: []guard.Violation{{Kind: "ConfigMap"}}}
		},
		calls:  []string{"Last", "Upgrade", "Last"},
		conds:  []string{"Released=False/ChartInvalid", "Ready=False/ChartInvalid", "Reconciling=False/ChartInvalid", "Stalled=True/ChartInvalid"},
		events: []string{"Warning ChartInvalid"},
		result: "terminal",
	}, {
		name: "upgrade forbidden after its revision was stored: rolled back, retried",
		setup: func(h *harness) {
			h.seed(common.StatusDeployed, false, 0, unitUID)
			h.helm.upgradeErr, h.helm.stores = unauthorized("services", "w"), true
		},
		calls:  []string{"Last", "Upgrade", "Last", "LastDeployed", "Rollback 1"},
		conds:  []string{"Released=False/Forbidden", "Ready=False/Forbidden", "Reconciling=True/Forbidden", "Stalled=False/Forbidden"},
		events: []string{"Warning Forbidden"},
		result: "retry",
	}, {
		name: "upgrade fails, then its rollback fails: retried (the next pass rolls back)",
		setup: func(h *harness) {
			h.seed(common.StatusDeployed, false, 0, unitUID)
			h.helm.upgradeErr, h.helm.stores, h.helm.rollbackErr = boom, true, boom
		},
		calls:  []string{"Last", "Upgrade", "Last", "LastDeployed", "Rollback 1"},
		conds:  []string{"Released=False/RollbackFailed", "Ready=False/RollbackFailed", "Reconciling=True/RollbackFailed", "Stalled=False/RollbackFailed"},
		events: []string{"Warning UpgradeFailed", "Warning RollbackFailed"},
		result: "retry",
	}, {
		name: "install fails, then removing its objects fails: retried (the next pass removes them)",
		setup: func(h *harness) {
			h.helm.installErr, h.helm.stores = boom, true
			h.helm.failNth, h.helm.nthErr = map[string]int{"KeepFailed": 1}, errors.New("etcdserver: leader changed")
		},
		calls:  []string{"Install", "Last", "KeepFailed"},
		conds:  []string{"Released=none", "Ready=False/ReconcileError", "Reconciling=True/ReconcileError", "Stalled=False/ReconcileError"},
		events: []string{"Warning InstallFailed"},
		result: "retry",
	}, {
		name:   "a failed install kept, its failure holding: held back, nothing done",
		setup:  func(h *harness) { h.seedKept(true) },
		calls:  []string{"Last"},
		conds:  []string{"Released=False/InstallFailed", "Ready=False/InstallFailed", "Reconciling=False/InstallFailed", "Stalled=True/InstallFailed"},
		result: "terminal",
	}, {
		name:   "a failed install kept, the spec changed since: installed over it",
		setup:  func(h *harness) { h.seedKept(false) },
		calls:  []string{"Last", "Install"},
		conds:  []string{"Released=True/InstallSucceeded", "Ready=True/ObjectsReady", "Reconciling=False/ObjectsReady", "Stalled=False/InstallSucceeded"},
		events: []string{"Normal InstallSucceeded"},
		result: "requeue",
	}, {
		name:   "a failed install kept, installed over it, and that install fails: kept too, held back",
		setup:  func(h *harness) { h.seedKept(false); h.helm.installErr, h.helm.stores = boom, true },
		calls:  []string{"Last", "Install", "Last", "KeepFailed"},
		conds:  []string{"Released=False/InstallFailed", "Ready=False/InstallFailed", "Reconciling=False/InstallFailed", "Stalled=True/InstallFailed"},
		events: []string{"Warning InstallFailed"},
		result: "terminal",
	}, {
		name: "left pending, and unlocking it fails: retried",
		setup: func(h *harness) {
			h.seed(common.StatusDeployed, false, 0, unitUID)
			h.seed(common.StatusPendingUpgrade, true, 0, unitUID)
			h.helm.failNth, h.helm.nthErr = map[string]int{"Unlock": 1}, errors.New("etcdserver: leader changed")
		},
		calls:  []string{"Last", "Unlock 2"},
		conds:  []string{"Released=none", "Ready=False/ReconcileError", "Reconciling=True/ReconcileError", "Stalled=False/ReconcileError"},
		result: "retry",
	}, {
		name: "left pending by rudder: unlocked, then upgraded",
		setup: func(h *harness) {
			h.seed(common.StatusDeployed, false, 0, unitUID)
			h.seed(common.StatusPendingUpgrade, true, 0, unitUID)
		},
		calls:  []string{"Last", "Unlock 2", "LastDeployed", "Upgrade"},
		conds:  []string{"Released=True/UpgradeSucceeded", "Ready=True/ObjectsReady", "Reconciling=False/ObjectsReady", "Stalled=False/UpgradeSucceeded"},
		events: []string{"Warning Unlocked", "Normal UpgradeSucceeded"},
		result: "requeue",
	}, {
		name: "an upgrade left pending although it completed (the revision it replaced superseded): marked deployed, no upgrade",
		setup: func(h *harness) {
			h.seed(common.StatusSuperseded, false, 0, unitUID)
			h.seed(common.StatusPendingUpgrade, true, 0, unitUID)
		},
		calls:  []string{"Last", "Unlock 2", "Last"},
		conds:  []string{"Released=True/UpToDate", "Ready=True/ObjectsReady", "Reconciling=False/ObjectsReady", "Stalled=False/UpToDate"},
		events: []string{"Normal Unlocked"},
		result: "requeue",
	}, {
		name: "someone else's pending rollback: waited for",
		setup: func(h *harness) {
			h.seed(common.StatusDeployed, true, 0, unitUID)
			h.seed(common.StatusPendingRollback, true, 1, unitUID)
		},
		calls:  []string{"Last"},
		waits:  true,
		conds:  []string{"Released=False/PendingOperation", "Ready=False/PendingOperation", "Reconciling=True/PendingOperation", "Stalled=False/PendingOperation"},
		result: "requeue",
	}, {
		name: "rudder's own pending rollback (its label, its number): unlocked at once",
		setup: func(h *harness) {
			h.seed(common.StatusDeployed, true, 0, unitUID)
			rb := h.seed(common.StatusPendingRollback, true, 1, unitUID)
			rb.Labels[records.LabelRollbackRevision] = strconv.Itoa(rb.Version)
			rb.Info.Description = "a description rudder does not read"
		},
		calls:  []string{"Last", "Unlock 2", "LastDeployed", "Upgrade"},
		conds:  []string{"Released=True/UpgradeSucceeded", "Ready=True/ObjectsReady", "Reconciling=False/ObjectsReady", "Stalled=False/UpgradeSucceeded"},
		events: []string{"Warning Unlocked", "Normal UpgradeSucceeded"},
		result: "requeue",
	}, {
		name: "a pending copy of rudder's rollback (helm rollback to it: another number): waited for",
		setup: func(h *harness) {
			h.seed(common.StatusDeployed, true, 0, unitUID)
			rb := h.seed(common.StatusPendingRollback, true, 1, unitUID)
			rb.Labels[records.LabelRollbackRevision] = "1"
		},
		calls:  []string{"Last"},
		waits:  true,
		conds:  []string{"Released=False/PendingOperation", "Ready=False/PendingOperation", "Reconciling=True/PendingOperation", "Stalled=False/PendingOperation"},
		result: "requeue",
	}, {
		name: "someone else's pending rollback, older than the grace: unlocked",
		setup: func(h *harness) {
			h.seed(common.StatusDeployed, true, 0, unitUID)
			h.seed(common.StatusPendingRollback, true, 1, unitUID)
			h.clock.Step(machine.ForeignPendingGrace)
		},
		calls:  []string{"Last", "Unlock 2", "LastDeployed", "Upgrade"},
		conds:  []string{"Released=True/UpgradeSucceeded", "Ready=True/ObjectsReady", "Reconciling=False/ObjectsReady", "Stalled=False/UpgradeSucceeded"},
		events: []string{"Warning Unlocked", "Normal UpgradeSucceeded"},
		result: "requeue",
	}, {
		name:   "failed install left by a dead pass: its objects removed, installed over it",
		setup:  func(h *harness) { h.seed(common.StatusFailed, true, 0, unitUID) },
		calls:  []string{"Last", "LastDeployed", "KeepFailed", "Install"},
		conds:  []string{"Released=True/InstallSucceeded", "Ready=True/ObjectsReady", "Reconciling=False/ObjectsReady", "Stalled=False/InstallSucceeded"},
		events: []string{"Normal InstallSucceeded"},
		result: "requeue",
	}, {
		name:   "a failed install whose keep died after its objects were removed: kept, held back",
		setup:  func(h *harness) { h.seedUnkept() },
		calls:  []string{"Last", "KeepFailed"},
		conds:  []string{"Released=False/InstallFailed", "Ready=False/InstallFailed", "Reconciling=False/InstallFailed", "Stalled=True/InstallFailed"},
		result: "terminal",
	}, {
		name:   "uninstall that died: finished, installed",
		setup:  func(h *harness) { h.seed(common.StatusUninstalling, true, 0, unitUID) },
		calls:  []string{"Last", "Uninstall", "Install"},
		conds:  []string{"Released=True/InstallSucceeded", "Ready=True/ObjectsReady", "Reconciling=False/ObjectsReady", "Stalled=False/InstallSucceeded"},
		events: []string{"Normal InstallSucceeded"},
		result: "requeue",
	}, {
		name:   "another owner's release: conflict",
		setup:  func(h *harness) { h.seed(common.StatusDeployed, true, 0, "someone-else") },
		calls:  []string{"Last"},
		conds:  []string{"Released=False/ReleaseNameConflict", "Ready=False/ReleaseNameConflict", "Reconciling=False/ReleaseNameConflict", "Stalled=True/ReleaseNameConflict"},
		result: "terminal",
	}, {
		name: "manual rollback: kept",
		opts: harnessOpts{status: map[string]any{"release": map[string]any{"name": "w", "revision": int64(2),
			"applied": map[string]any{"revision": int64(2), "generation": int64(1), "chartDigest": "CHART"}}}},
		setup:  seedManualRollback,
		calls:  []string{"Last"},
		conds:  []string{"Released=True/ManualRollback", "Ready=True/ObjectsReady", "Reconciling=False/ObjectsReady", "Stalled=False/ManualRollback"},
		events: []string{"Normal ManualRollback"},
		result: "requeue",
	}, {
		name: "rollback-to annotation: rolled back, kept",
		opts: harnessOpts{annotations: map[string]string{machine.AnnotationRollbackTo: "1"},
			status: map[string]any{"release": map[string]any{"name": "w", "revision": int64(2),
				"applied": map[string]any{"revision": int64(2), "generation": int64(1), "chartDigest": "CHART"}}}},
		setup: func(h *harness) {
			h.seed(common.StatusSuperseded, false, 0, unitUID)
			h.seedApplied(common.StatusDeployed)
		},
		calls:  []string{"Revision 1", "Rollback 1", "Last"},
		conds:  []string{"Released=True/ManualRollback", "RollbackRequest=True/RolledBack", "Ready=True/ObjectsReady", "Stalled=False/ManualRollback"},
		events: []string{"Normal RolledBack"},
		result: "requeue",
	}, {
		name:   "rollback-to a revision the history lacks: rejected",
		opts:   harnessOpts{annotations: map[string]string{machine.AnnotationRollbackTo: "9"}},
		setup:  func(h *harness) { h.seed(common.StatusDeployed, true, 0, unitUID) },
		calls:  []string{"Revision 9", "Last"},
		conds:  []string{"Released=True/UpToDate", "RollbackRequest=False/RollbackRejected", "Ready=True/ObjectsReady", "Stalled=False/UpToDate"},
		events: []string{"Warning RollbackRejected"},
		result: "requeue",
	}, {
		name: "held by a hook with no release",
		opts: harnessOpts{pre: hook.PreReleaseFunc(func(context.Context, *unstructured.Unstructured, map[string]any) (hook.Decision, error) {
			return hook.Decision{Hold: true, Reason: "Scheduled", Message: "later", RequeueAfter: time.Minute}, nil
		})},
		conds:  []string{"Released=False/Scheduled", "Ready=False/Scheduled", "Reconciling=True/Scheduled", "Stalled=False/Scheduled"},
		result: "requeue",
	}, {
		name: "held by a hook with a release: its objects still read",
		opts: harnessOpts{pre: hook.PreReleaseFunc(func(context.Context, *unstructured.Unstructured, map[string]any) (hook.Decision, error) {
			return hook.Decision{Hold: true, Reason: "Done"}, nil
		})},
		setup:  func(h *harness) { h.seed(common.StatusDeployed, false, 0, unitUID) },
		calls:  []string{"Last"},
		conds:  []string{"Released=False/Done", "Ready=True/ObjectsReady", "Reconciling=False/ObjectsReady", "Stalled=False/Done"},
		result: "requeue",
	}, {
		name: "pre-release hook fails",
		opts: harnessOpts{pre: hook.PreReleaseFunc(func(context.Context, *unstructured.Unstructured, map[string]any) (hook.Decision, error) {
			return hook.Decision{}, boom
		})},
		conds:  []string{"Released=none", "Ready=False/HookFailed", "Reconciling=True/HookFailed", "Stalled=False/HookFailed"},
		events: []string{"Warning HookFailed"},
		result: "retry",
	}, {
		name: "moved to this shard: adopted in place",
		opts: harnessOpts{carried: []string{"rudder.dev/shard"}, labels: map[string]string{"rudder.dev/shard": "b"},
			status: map[string]any{"release": map[string]any{"name": "w", "revision": int64(1),
				"applied": map[string]any{"revision": int64(1), "generation": int64(1), "chartDigest": "CHART"}}}},
		setup: func(h *harness) {
			h.seed(common.StatusDeployed, true, 0, unitUID).Labels["rudder.dev/shard"] = "a"
			h.helm.hidden = true // this shard's cache does not select the old shard's records
		},
		calls:  []string{"Last", "Relabel rudder.dev/shard=b", "Writer"},
		conds:  []string{"Released=True/UpToDate", "Ready=True/ObjectsReady", "Stalled=False/UpToDate"},
		events: []string{"Normal Adopted"},
		result: "requeue",
	}, {
		name:   "install, tests pass",
		opts:   harnessOpts{chart: "tested", watch: "  test: {enable: true}\n"},
		calls:  []string{"Install", "Test"},
		conds:  []string{"Released=True/InstallSucceeded", "Tested=True/TestSucceeded", "Ready=True/ObjectsReady", "Stalled=False/InstallSucceeded"},
		events: []string{"Normal InstallSucceeded", "Normal TestSucceeded"},
		result: "requeue",
	}, {
		name:   "install, tests fail: reported",
		opts:   harnessOpts{chart: "tested", watch: "  test: {enable: true}\n"},
		setup:  func(h *harness) { h.helm.testErr = errors.New("pod w-checks failed") },
		calls:  []string{"Install", "Test"},
		conds:  []string{"Released=True/InstallSucceeded", "Tested=False/TestFailed", "Ready=True/ObjectsReady", "Stalled=False/InstallSucceeded"},
		events: []string{"Normal InstallSucceeded", "Warning TestFailed"},
		result: "requeue",
	}, {
		name: "upgrade, tests fail, onFailure rollback: rolled back, held back",
		opts: harnessOpts{chart: "tested", watch: "  test: {enable: true, onFailure: rollback}\n"},
		setup: func(h *harness) {
			h.seed(common.StatusDeployed, false, 0, unitUID)
			h.helm.testErr = errors.New("pod w-checks failed")
		},
		calls:  []string{"Last", "Upgrade", "Test", "LastDeployed", "Rollback 1"},
		conds:  []string{"Released=False/RolledBack", "Tested=False/TestFailed", "Ready=False/TestFailed", "Stalled=True/TestFailed"},
		events: []string{"Normal UpgradeSucceeded", "Warning TestFailed", "Normal RolledBack"},
		result: "terminal",
	}, {
		name: "tests could not run: retried, the release as it is",
		opts: harnessOpts{chart: "tested", watch: "  test: {enable: true}\n"},
		setup: func(h *harness) {
			h.helm.failNth, h.helm.nthErr = map[string]int{"Test": 1}, errors.New("etcdserver: leader changed")
		},
		calls:  []string{"Install", "Test"},
		conds:  []string{"Released=True/InstallSucceeded", "Tested=none", "Ready=False/TestFailed", "Stalled=False/TestFailed"},
		events: []string{"Normal InstallSucceeded"},
		result: "retry",
	}, {
		name:   "valuesFrom, a source missing: held until it exists, nothing released",
		opts:   harnessOpts{watch: "  valuesFrom: [{kind: Secret, name: '{{ .metadata.name }}-db'}]\n"},
		conds:  []string{"Released=False/ValuesFromMissing", "Ready=False/ValuesFromMissing", "Stalled=True/ValuesFromMissing"},
		result: "terminal",
	}, {
		name: "valuesFrom, a source the identity may not read: Forbidden, retried",
		opts: harnessOpts{watch: "  valuesFrom: [{kind: Secret, name: '{{ .metadata.name }}-db'}]\n",
			sourcesErr: unauthorized("secrets", "w-db")},
		conds:  []string{"Released=False/Forbidden", "Ready=False/Forbidden", "Stalled=False/Forbidden"},
		events: []string{"Warning Forbidden"},
		result: "retry",
	}, {
		name: "valuesFrom, a source's content changed: upgrade",
		opts: harnessOpts{watch: "  valuesFrom: [{kind: Secret, name: '{{ .metadata.name }}-db'}]\n",
			sources: map[string]string{"w-db": "message: the spec wins\nextra: from-the-source\n"}},
		setup:  func(h *harness) { h.seed(common.StatusDeployed, true, 0, unitUID) },
		calls:  []string{"Last", "Upgrade"},
		conds:  []string{"Released=True/UpgradeSucceeded", "Ready=True/ObjectsReady", "Stalled=False/UpgradeSucceeded"},
		events: []string{"Normal UpgradeSucceeded"},
		result: "requeue",
	}, {
		name: "install refused by a ResourceQuota (admission, not RBAC): failed and held back",
		setup: func(h *harness) {
			h.helm.installErr, h.helm.stores = apierrors.NewForbidden(schema.GroupResource{Resource: "configmaps"}, "w",
				errors.New("exceeded quota: q, requested: count/configmaps=1, used: count/configmaps=0, limited: count/configmaps=0")), true
		},
		calls:  []string{"Install", "Last", "KeepFailed"},
		conds:  []string{"Released=False/InstallFailed", "Ready=False/InstallFailed", "Reconciling=False/InstallFailed", "Stalled=True/InstallFailed"},
		events: []string{"Warning InstallFailed"},
		result: "terminal",
	}, {
		name:   "install fails with retries left: removed, tried again after the back-off",
		opts:   harnessOpts{watch: "  remediation: {retries: 2}\n"},
		setup:  func(h *harness) { h.helm.installErr, h.helm.stores = boom, true },
		calls:  []string{"Install", "Last", "KeepFailed"},
		waits:  true,
		conds:  []string{"Released=False/InstallFailed", "Ready=False/RetryScheduled", "Reconciling=True/RetryScheduled", "Stalled=False/RetryScheduled"},
		events: []string{"Warning InstallFailed"},
		result: "requeue",
	}, {
		name:   "a failed install whose retry is not due: nothing tried",
		opts:   harnessOpts{watch: "  remediation: {retries: 2}\n"},
		setup:  func(h *harness) { h.seedKeptFailure(1, time.Second) },
		waits:  true,
		calls:  []string{"Last"},
		conds:  []string{"Ready=False/RetryScheduled", "Reconciling=True/RetryScheduled", "Stalled=False/RetryScheduled"},
		result: "requeue",
	}, {
		name:   "a failed install whose retry is due: installed",
		opts:   harnessOpts{watch: "  remediation: {retries: 2}\n"},
		setup:  func(h *harness) { h.seedKeptFailure(2, 11*time.Second) },
		calls:  []string{"Last", "Install"},
		conds:  []string{"Released=True/InstallSucceeded", "Ready=True/ObjectsReady", "Stalled=False/InstallSucceeded"},
		events: []string{"Normal InstallSucceeded"},
		result: "requeue",
	}, {
		name:   "a failed install out of retries: held back",
		opts:   harnessOpts{watch: "  remediation: {retries: 2}\n"},
		setup:  func(h *harness) { h.seedKeptFailure(3, time.Hour) },
		calls:  []string{"Last"},
		conds:  []string{"Ready=False/InstallFailed", "Stalled=True/InstallFailed"},
		result: "terminal",
	}, {
		name: "a confinement failure is not retried",
		opts: harnessOpts{watch: "  remediation: {retries: 2}\n"},
		setup: func(h *harness) {
			h.helm.installErr = refused()
			h.passOnce() // no revision stored
			h.helm.installErr = nil
			h.eventReasons()
		},
		calls:  []string{"Last"},
		conds:  []string{"Ready=False/ChartInvalid", "Stalled=True/ChartInvalid"},
		result: "terminal",
	}, {
		name: "upgrade fails with retries left: rolled back, tried again after the back-off",
		opts: harnessOpts{watch: "  remediation: {retries: 1}\n"},
		setup: func(h *harness) {
			h.seed(common.StatusDeployed, false, 0, unitUID)
			h.helm.upgradeErr, h.helm.stores = boom, true
		},
		calls:  []string{"Last", "Upgrade", "Last", "LastDeployed", "Rollback 1"},
		waits:  true,
		conds:  []string{"Released=False/RolledBack", "Ready=False/RetryScheduled", "Stalled=False/RetryScheduled"},
		events: []string{"Warning UpgradeFailed", "Normal RolledBack"},
		result: "requeue",
	}, {
		name:   "paused",
		opts:   harnessOpts{annotations: map[string]string{machine.AnnotationPaused: "true"}},
		conds:  []string{"Paused=True/Paused", "Reconciling=False/Paused", "Released=none"},
		result: "done",
	}, {
		name:   "storage unreadable: retried",
		setup:  func(h *harness) { h.seed(common.StatusDeployed, false, 0, unitUID); h.helm.lastErr = boom },
		calls:  []string{"Last"},
		conds:  []string{"Released=none", "Ready=False/ReconcileError", "Reconciling=True/ReconcileError"},
		result: "retry",
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if tc.opts.status != nil {
				tc.opts.status = runtime.DeepCopyJSON(tc.opts.status)
			}
			h := newHarness(t, tc.opts)
			h.fixDigests(tc.opts.status)
			if tc.setup != nil {
				tc.setup(h)
			}
			h.helm.Calls()
			res, err := h.pass()
			if got := outcomeOf(res, err); got != tc.result {
				t.Errorf("result %s (%v, %v), want %s", got, res, err, tc.result)
			}
			if got := h.helm.Calls(); !slices.Equal(got, tc.calls) {
				t.Errorf("Helm calls %q, want %q", got, tc.calls)
			}
			var typs []string
			for _, c := range tc.conds {
				typs = append(typs, c[:strings.Index(c, "=")])
			}
			if got := h.conds(typs...); !slices.Equal(got, tc.conds) {
				t.Errorf("conditions %q, want %q", got, tc.conds)
			}
			if got := h.eventReasons(); !slices.Equal(got, tc.events) {
				t.Errorf("events %q, want %q", got, tc.events)
			}
			og, _, _ := unstructured.NestedInt64(h.cr().Object, "status", "observedGeneration")
			if completed := (tc.result == "requeue" || tc.result == "terminal") && !tc.waits; completed != (og == 1) {
				t.Errorf("observedGeneration %d after a %s pass", og, tc.result)
			}
		})
	}
}

// failedBefore records in the CR's status that its (chart, values) failed n times for reason,
// the last time ago, as the pass that took the CR on (and added rudder's finalizer) left it.
func (h *harness) failedBefore(reason string, n int, ago time.Duration) {
	h.t.Helper()
	u := h.cr()
	u.SetFinalizers([]string{Finalizer})
	if err := h.c.Update(context.Background(), u); err != nil {
		h.t.Fatal(err)
	}
	u = h.cr()
	if u.Object["status"] == nil {
		delete(u.Object, "status")
	}
	failed := map[string]any{"chartDigest": h.chartDigest, "valuesDigest": h.valuesDigest, "reason": reason, "message": "boom",
		"failures": int64(n), "lastFailure": h.clock.Now().Add(-ago).UTC().Format(time.RFC3339)}
	if err := unstructured.SetNestedField(u.Object, failed, "status", "release", "failed"); err != nil {
		h.t.Fatal(err)
	}
	if err := h.c.Status().Update(context.Background(), u); err != nil {
		h.t.Fatal(err)
	}
}

// fixDigests puts the chart digest into a seeded status (the table cannot know it).
func (h *harness) fixDigests(status map[string]any) {
	if status == nil {
		return
	}
	if err := unstructured.SetNestedField(status, h.chartDigest, "release", "applied", "chartDigest"); err != nil {
		h.t.Fatal(err)
	}
	u := h.cr()
	u.Object["status"] = status
	if err := h.c.Status().Update(context.Background(), u); err != nil {
		h.t.Fatal(err)
	}
}

// knownObjects makes the next revisions' manifests unreadable, and Helm's client report their
// objects: a pass that reads the manifest fails.
func (h *harness) knownObjects() {
	h.helm.Manifest = "apiVersion: [unreadable"
	h.helm.Made = []*unstructured.Unstructured{helm.Identity("v1", "ConfigMap", "ns", "w")}
}

func (h *harness) deleteObject() {
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "w"}}
	if err := h.c.Delete(context.Background(), cm); err != nil {
		h.t.Fatal(err)
	}
}

// A transient error reading the history after a failed upgrade is retried, not reported as
// "no deployed revision": the failed pair stays held back, and the next pass rolls back to the
// deployed revision, as the failed pass would have. So does a pass after a failed rollback.
func TestPassRollsBackAfterATransientHistoryError(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		broken func(h *harness)
	}{
		{"Last", func(h *harness) {
			h.helm.failNth, h.helm.nthErr = map[string]int{"Last": 2}, errors.New("etcdserver: leader changed")
		}},
		{"LastDeployed", func(h *harness) {
			h.helm.failNth, h.helm.nthErr = map[string]int{"LastDeployed": 1}, errors.New("etcdserver: leader changed")
		}},
		{"Rollback", func(h *harness) { h.helm.rollbackErr = errors.New("etcdserver: leader changed") }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, harnessOpts{})
			h.seed(common.StatusDeployed, false, 0, unitUID)
			h.helm.upgradeErr, h.helm.stores = errors.New("boom"), true
			tc.broken(h)
			res, err := h.pass()
			if got := outcomeOf(res, err); got != "retry" || strings.Contains(fmt.Sprint(err), "no deployed revision") {
				t.Fatalf("first pass: %s, %v; want a retry", got, err)
			}
			if got := h.conds(rstatus.TypeStalled); got[0] != "Stalled=False/UpgradeFailed" && got[0] != "Stalled=False/RollbackFailed" {
				t.Fatalf("first pass: %v, want not stalled", got)
			}
			h.helm.Calls()
			h.helm.rollbackErr, h.helm.failNth = nil, nil
			res, err = h.pass()
			if got := outcomeOf(res, err); got != "terminal" {
				t.Fatalf("second pass: %s, %v; want held back", got, err)
			}
			calls := h.helm.Calls()
			if slices.Contains(calls, "Upgrade") || !slices.Contains(calls, "Rollback 1") {
				t.Fatalf("second pass calls %q: want a rollback to 1 and no upgrade", calls)
			}
			if got := h.conds(rstatus.TypeReleased, rstatus.TypeStalled); !slices.Equal(got, []string{"Released=False/RolledBack", "Stalled=True/UpgradeFailed"}) {
				t.Fatalf("second pass: %v", got)
			}
		})
	}
}

// The tests of a revision run once: right after the install, or, when they could not run
// then (a transient failure, or a crash between the two), on the next pass; never again on
// an idle pass. The outcome is kept per revision in status.release.tested.
func TestPassTestsOncePerRevision(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{chart: "tested", watch: "  test: {enable: true}\n"})
	h.helm.failNth, h.helm.nthErr = map[string]int{"Test": 1}, errors.New("etcdserver: leader changed")
	// The second pass reads the manifest too: the first ended before it looked at the objects.
	for i, want := range [][]string{{"Install", "Test"}, {"Test", "Last"}, nil, nil} {
		res, err := h.pass()
		if got := h.helm.Calls(); !slices.Equal(got, want) {
			t.Fatalf("pass %d: calls %q, want %q (%v, %v)", i+1, got, want, res, err)
		}
	}
	tested, _, _ := unstructured.NestedMap(h.cr().Object, "status", "release", "tested")
	if tested["revision"] != int64(1) || tested["result"] != rstatus.TestSucceeded {
		t.Fatalf("status.release.tested = %v", tested)
	}
	if got := h.conds(rstatus.TypeTested); got[0] != "Tested=True/TestSucceeded" {
		t.Fatalf("%v", got)
	}
}

// A pass that reads the CR from a cache behind the status the previous pass wrote writes the
// conditions list as it knows it: the Tested and RollbackRequest conditions of that previous
// pass are kept (the pass reads the status this process wrote), not dropped.
func TestPassBehindTheCacheKeepsConditions(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{chart: "tested", watch: "  test: {enable: true}\n",
		annotations: map[string]string{machine.AnnotationRollbackTo: "9"}})
	stale := h.cr()
	if _, err := h.pass(); err != nil {
		t.Fatal(err)
	}
	want := []string{"Tested=True/TestSucceeded", "RollbackRequest=False/RollbackRejected"}
	if got := h.conds(rstatus.TypeTested, rstatus.TypeRollbackRequest); !slices.Equal(got, want) {
		t.Fatalf("first pass: %v", got)
	}
	// The cache shows the CR as it was before the first pass wrote its status.
	h.behind.serve(stale)
	h.helm.Calls()
	if _, err := h.pass(); err != nil {
		t.Fatal(err)
	}
	if got := h.conds(rstatus.TypeTested, rstatus.TypeRollbackRequest); !slices.Equal(got, want) {
		t.Fatalf("a pass behind the status: %v", got)
	}
	if calls := h.helm.Calls(); slices.Contains(calls, "Test") || slices.Contains(calls, "Revision 9") {
		t.Fatalf("the pass behind the status acted again: %q", calls)
	}
}

// A PostRelease hook owns the condition types rudder does not: what it sets, changes or removes
// is kept on every pass, those where rudder's own part of the status changes too; its edit of
// a type rudder owns is not.
func TestPassKeepsHookConditions(t *testing.T) {
	t.Parallel()
	n, remove := 0, false
	post := hook.PostReleaseFunc(func(_ context.Context, obj *unstructured.Unstructured, _ *hook.Release, _ client.Reader) (time.Duration, error) {
		n++
		conds := rstatus.ConditionsOf(obj)
		if remove {
			meta.RemoveStatusCondition(&conds, "Mirrored")
		} else {
			meta.SetStatusCondition(&conds, metav1.Condition{Type: "Mirrored", Status: metav1.ConditionTrue, Reason: fmt.Sprintf("Pass%d", n), Message: "mirrored"})
		}
		meta.SetStatusCondition(&conds, metav1.Condition{Type: rstatus.TypeReady, Status: metav1.ConditionFalse, Reason: "Hacked"})
		return 0, rstatus.SetConditions(obj, conds)
	})
	h := newHarness(t, harnessOpts{post: post})
	check := func(step string, want ...string) {
		t.Helper()
		if _, err := h.pass(); err != nil {
			t.Fatalf("%s: %v", step, err)
		}
		if got := h.conds("Mirrored", rstatus.TypeReady); !slices.Equal(got, want) {
			t.Fatalf("%s: %v, want %v", step, got, want)
		}
	}
	check("install", "Mirrored=True/Pass1", "Ready=True/ObjectsReady")
	u := h.cr()
	if err := unstructured.SetNestedField(u.Object, "changed", "spec", "message"); err != nil {
		t.Fatal(err)
	}
	u.SetGeneration(2)
	if err := h.c.Update(context.Background(), u); err != nil {
		t.Fatal(err)
	}
	check("upgrade", "Mirrored=True/Pass2", "Ready=True/ObjectsReady")
	check("idle", "Mirrored=True/Pass3", "Ready=True/ObjectsReady")
	remove = true
	check("removed", "Mirrored=none", "Ready=True/ObjectsReady")
}

// A failed (chart, values) is not tried again: the next pass with the same spec makes no
// install, and a spec change does.
func TestPassHoldsBackAFailure(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{})
	h.helm.installErr, h.helm.stores = errors.New("boom"), true
	if _, err := h.pass(); outcomeOf(reconcile.Result{}, err) != "terminal" {
		t.Fatalf("first pass: %v", err)
	}
	h.helm.Calls()
	h.helm.installErr = nil
	if _, err := h.pass(); outcomeOf(reconcile.Result{}, err) != "terminal" {
		t.Fatalf("second pass: %v, want it stalled again", err)
	}
	if got := h.helm.Calls(); slices.Contains(got, "Install") {
		t.Fatalf("a held-back failure was tried again: %q", got)
	}
	u := h.cr()
	if err := unstructured.SetNestedField(u.Object, "changed", "spec", "message"); err != nil {
		t.Fatal(err)
	}
	u.SetGeneration(2)
	if err := h.c.Update(context.Background(), u); err != nil {
		t.Fatal(err)
	}
	if res, err := h.pass(); outcomeOf(res, err) != "requeue" {
		t.Fatalf("after a spec change: %v, %v", res, err)
	}
	if got := h.helm.Calls(); !slices.Contains(got, "Install") {
		t.Fatalf("a changed spec was not installed: %q", got)
	}
}

// rudder.dev/reconcile-at tries a held-back pair once per value; rudder.dev/reset-at clears
// the failure, then reconciles; the same value again does nothing. status.release records
// the values handled.
func TestPassNudges(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{})
	h.helm.installErr, h.helm.stores = errors.New("quota exceeded"), true
	installs := func(step string, want int) {
		t.Helper()
		h.helm.Calls()
		_, _ = h.pass()
		if got := slices.Index(h.helm.Calls(), "Install") >= 0; got != (want == 1) {
			t.Fatalf("%s: installed %v, want %v", step, got, want == 1)
		}
	}
	installs("the failure", 1)
	installs("held back", 0)
	h.annotate(machine.AnnotationReconcileAt, "1")
	installs("reconcile-at=1", 1)
	installs("reconcile-at=1 again", 0)
	if got, _, _ := unstructured.NestedString(h.cr().Object, "status", "release", "reconcileRequest"); got != "1" {
		t.Fatalf("status.release.reconcileRequest %q", got)
	}
	h.helm.installErr = nil
	h.annotate(machine.AnnotationResetAt, "a")
	installs("reset-at=a", 1)
	rel, _, _ := unstructured.NestedMap(h.cr().Object, "status", "release")
	if rel["resetRequest"] != "a" || rel["failed"] != nil {
		t.Fatalf("status.release after reset-at: %v", rel)
	}
	if got := h.conds(rstatus.TypeReady); got[0] != "Ready=True/ObjectsReady" {
		t.Fatalf("%v", got)
	}
	installs("reset-at=a again", 0)
}

// A pass that changes nothing writes nothing: the second pass over an in-sync release sends
// no status patch.
func TestPassInSyncWritesNothing(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{})
	if _, err := h.pass(); err != nil {
		t.Fatal(err)
	}
	before := h.cr()
	if _, err := h.pass(); err != nil {
		t.Fatal(err)
	}
	if after := h.cr(); after.GetResourceVersion() != before.GetResourceVersion() {
		t.Fatalf("an idle pass wrote the CR:\n%v\n%v", before.Object["status"], after.Object["status"])
	}
	if got := h.helm.Calls(); !slices.Equal(got, []string{"Install"}) {
		t.Fatalf("Helm calls %q, want one install", got)
	}
}

// unauthorized is the API server's refusal by RBAC of a create of resource (name: the object's).
func unauthorized(resource, name string) error {
	return apierrors.NewForbidden(schema.GroupResource{Resource: resource}, name,
		fmt.Errorf(`User "system:serviceaccount:ns:rudder" cannot create resource %q in API group "" in the namespace "ns"`, resource))
}

// remediation.retries: a failed install is tried again once each back-off (5s, then 10s) has
// passed, never before, and held back after retries+1 failures; reconcile-at tries it once
// more, counted on; reset-at starts the count again.
func TestPassRetries(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{watch: "  remediation: {retries: 2}\n"})
	h.helm.installErr, h.helm.stores = errors.New("quota exceeded"), true
	step := func(what string, wait time.Duration, wantInstall bool, wantFailures int64, wantStalled metav1.ConditionStatus) {
		t.Helper()
		h.clock.Step(wait)
		h.helm.Calls()
		_, _ = h.pass()
		if got := slices.Contains(h.helm.Calls(), "Install"); got != wantInstall {
			t.Fatalf("%s: installed %v, want %v", what, got, wantInstall)
		}
		n, _, _ := unstructured.NestedInt64(h.cr().Object, "status", "release", "failed", "failures")
		stalled := meta.FindStatusCondition(rstatus.ConditionsOf(h.cr()), rstatus.TypeStalled)
		if n != wantFailures || stalled == nil || stalled.Status != wantStalled {
			t.Fatalf("%s: %d failures, Stalled %+v; want %d, %s", what, n, stalled, wantFailures, wantStalled)
		}
	}
	step("the first failure", 0, true, 1, metav1.ConditionFalse)
	step("before its back-off", 4*time.Second, false, 1, metav1.ConditionFalse)
	step("after 5s", time.Second, true, 2, metav1.ConditionFalse)
	step("before the next back-off", 9*time.Second, false, 2, metav1.ConditionFalse)
	step("after 10s", time.Second, true, 3, metav1.ConditionTrue)
	step("out of retries", time.Hour, false, 3, metav1.ConditionTrue)
	crtest.Update(t, h.c, unitGVK, "ns", "w", func(u *unstructured.Unstructured) {
		u.SetAnnotations(map[string]string{machine.AnnotationReconcileAt: "1"})
	})
	step("reconcile-at", 0, true, 4, metav1.ConditionTrue)
	crtest.Update(t, h.c, unitGVK, "ns", "w", func(u *unstructured.Unstructured) {
		u.SetAnnotations(map[string]string{machine.AnnotationReconcileAt: "1", machine.AnnotationResetAt: "a"})
	})
	step("reset-at", 0, true, 1, metav1.ConditionFalse)
}

// An install over a failed install whose record is kept (records.Head.Kept) is Helm's replace:
// the failed record stays in the history as it was, and the install is the revision after
// it, stamped as an install.
func TestPassInstallsOverAKeptFailedInstall(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{})
	kept := h.seedKept(false)
	want := maps.Clone(kept.Labels)
	h.passOnce()
	hist := h.helm.Stored("ns", "w")
	if len(hist) != 2 {
		t.Fatalf("history of %d revisions after the install, want 2", len(hist))
	}
	if first := hist[0]; first.Info.Status != common.StatusFailed || first.Info.Description != kept.Info.Description || !maps.Equal(first.Labels, want) {
		t.Errorf("the kept record became %s %q %v", first.Info.Status, first.Info.Description, first.Labels)
	}
	second := records.HeadOf(helm.View(hist[1]))
	if second.Status != "deployed" || second.MadeBy() != records.ActionInstall || second.ValuesDigest != h.valuesDigest || second.Facts == nil || second.Facts.Failed != nil {
		t.Errorf("the install over it: %+v, facts %+v", second, second.Facts)
	}
}

// A failed install keeps its record, and each spec that fails to install again keeps one more:
// Helm's install prunes no history, so the oldest kept failures go once the history would
// hold more than maxHistory revisions, and the newest failure is always there.
func TestKeptFailedInstallsStayWithinMaxHistory(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{watch: "  maxHistory: 3\n"})
	h.helm.installErr, h.helm.stores = errors.New("boom"), true
	for gen := int64(1); gen <= 6; gen++ {
		if gen > 1 {
			u := h.cr()
			if err := unstructured.SetNestedField(u.Object, fmt.Sprintf("try %d", gen), "spec", "message"); err != nil {
				t.Fatal(err)
			}
			u.SetGeneration(gen)
			if err := h.c.Update(context.Background(), u); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := h.pass(); outcomeOf(reconcile.Result{}, err) != "terminal" {
			t.Fatalf("generation %d: %v, want it held back", gen, err)
		}
	}
	var got []string
	for _, r := range h.helm.Stored("ns", "w") {
		got = append(got, fmt.Sprintf("%d %s", r.Version, r.Info.Status))
		if !records.HeadOf(helm.View(r)).Kept() {
			t.Errorf("revision %d is not a kept failed install: %v", r.Version, r.Labels)
		}
	}
	if want := []string{"4 failed", "5 failed", "6 failed"}; !slices.Equal(got, want) {
		t.Errorf("history %q, want %q", got, want)
	}
}
