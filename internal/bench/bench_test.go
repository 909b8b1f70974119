// Package bench measures rudder against the real control plane of internal/testcluster, with
// rudder in-process (its CPU and heap are this process's). Run with `make bench`, which passes
// -benchtime 1x: each benchmark is one scenario, not a loop. docs/bench.md reports the figures.
// The control plane runs on CPU 0 and this process on the others (cores_test.go) unless
// RUDDER_BENCH_SHARED_CORES is set.
//
//   - BenchmarkConverge300: 300 CRs of a Deployment+Service chart, from the first create to every
//     release deployed, against the API server storing the same 600 objects directly, and
//     against the protocol floor (the requests rudder sends, sent by a plain client: floor_test.go),
//     with the CPU time of every process of the control plane in each phase;
//   - BenchmarkIdleResync300: one reconcile period over those 300 idle CRs — API writes, Helm
//     actions (every chart render happens in one), operator CPU per CR;
//   - BenchmarkMemorySecrets: rudder's heap before and after 3000 unrelated Secrets appear;
//   - BenchmarkChartReload: a chart file change (kubelet-style ..data swap) to all N CRs upgraded,
//     N = 10 and 100;
//   - BenchmarkDependsOn (dependson_test.go): 200 CRs waiting for 20 they depend on, woken
//     by their changes: passes and requests per dependent;
//   - BenchmarkScale (scale_test.go): rudder as its own process on a minimal control plane of
//     its own, at N = 300 and 2000: convergence, CPU per install and per idle pass, RSS and heap
//     per CR, and docs/bench-scale.svg.
package bench_test

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	runtimemetrics "runtime/metrics"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"go.uber.org/zap/zapcore"
	"golang.org/x/sync/errgroup"
	"helm.sh/helm/v4/pkg/action"
	"helm.sh/helm/v4/pkg/chart/common"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	release "helm.sh/helm/v4/pkg/release/v1"
	releaseutil "helm.sh/helm/v4/pkg/release/v1/util"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/yaml"

	"github.com/rudder-operator/rudder/internal/chartsource/chartsourcetest"
	"github.com/rudder-operator/rudder/internal/crtest"
	"github.com/rudder-operator/rudder/internal/records"
	"github.com/rudder-operator/rudder/internal/testcluster"
	"github.com/rudder-operator/rudder/internal/watches"
	"github.com/rudder-operator/rudder/internal/wiring"
)

const (
	fleet = 300
	// workers is rudder's default --max-concurrent-reconciles, and the parallelism of the
	// baseline client.
	workers      = 4
	resyncPeriod = 20 * time.Second
)

var (
	cluster *testcluster.Cluster
	k8s     client.Client
	// crs is the harness's informer cache of the CRs: counting them from it costs no API
	// request and no decoding per poll (a List of 300 CRs every 100 ms ate a core).
	crs      cache.Cache
	chartDir string
	repoRoot string
	writes   atomic.Int64 // API requests rudder sent that are not reads
	requests atomic.Int64 // API requests rudder sent, but watches

	webGVK = schema.GroupVersionKind{Group: "bench.rudder.dev", Version: "v1", Kind: "Web"}
)

func TestMain(m *testing.M) {
	warn := zapcore.WarnLevel // warnings and errors only
	os.Exit(crtest.Main(m, crtest.Suite{
		// `go test ./...` (make test): no benchmark, no control plane.
		Skip:     func() bool { flag.Parse(); return flag.Lookup("test.bench").Value.String() == "" },
		Scheme:   wiring.Scheme(),
		LogLevel: &warn,
		Options: func(o *testcluster.Options, root string) {
			o.CRDDirectoryPaths = []string{"testdata/crds", filepath.Join(root, "config/crd/bases/rudder.dev_rollouts.yaml")}
		},
		BeforeStart: func() error {
			if !isolateCores() {
				return nil
			}
			// The control plane forked from here inherits CPU 0; this process moves off it after.
			return pinSelf(0)
		},
		Setup: setup,
	}))
}

// setup moves this process off the control plane's core, then runs rudder in it, with the
// bench's kinds, and a cache of their CRs for the waits.
func setup(e *crtest.Env) (func() error, error) {
	cluster, repoRoot = e.Cluster, e.Root
	if isolateCores() {
		if err := pinSelf(otherCPUs()...); err != nil {
			return nil, fmt.Errorf("isolating cores: %w", err)
		}
		fmt.Printf("cores: control plane on CPU 0, rudder and the plain clients on CPUs %v (RUDDER_BENCH_SHARED_CORES=1 shares all)\n", otherCPUs())
	} else {
		fmt.Println("cores: control plane, rudder and the plain clients share every CPU")
	}
	cfg := rest.CopyConfig(e.Cluster.Config)
	cfg.QPS = -1 // as ctrl.GetConfig: no client-side throttling, the API server's fairness rules
	var err error
	if k8s, err = client.New(cfg, client.Options{Scheme: wiring.Scheme()}); err != nil {
		return nil, err
	}
	if crs, err = cache.New(cfg, cache.Options{Scheme: wiring.Scheme()}); err != nil {
		return nil, err
	}
	if chartDir, err = os.MkdirTemp("", "rudder-bench-"); err != nil {
		return nil, err
	}
	ws, err := benchWatches()
	if err != nil {
		return nil, err
	}
	rcfg := rest.CopyConfig(cfg)
	rcfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { return countRequests{rt} })
	mgr, _, err := wiring.NewManager(rcfg, wiring.ManagerOptions{
		Watches: ws, MaxConcurrentReconciles: envInt("RUDDER_BENCH_WORKERS", workers),
		ChartReload: true, ChartDebounce: time.Second, // the defaults of main.go
	})
	if err != nil {
		return nil, err
	}
	stop := crtest.StartManager(mgr)
	ctx, cancel := context.WithCancel(context.Background())
	go func() { _ = crs.Start(ctx) }()
	return func() error {
		cancel()
		return errors.Join(stop(), os.RemoveAll(chartDir))
	}, nil
}

// benchWatches publishes the web chart for each kind, laid out as a ConfigMap volume, and
// returns their watches.
func benchWatches() ([]*watches.Watch, error) {
	web, err := chartsourcetest.ReadDir("testdata/charts/web")
	if err != nil {
		return nil, err
	}
	// Site10, Site100, Shared100, Wave100, Crowd, Db20 and App200 each get their own copy.
	for _, d := range []string{"web", "site10", "site100", "shared100", "wave100", "crowd", "db20", "app200"} {
		if err := chartsourcetest.PublishAtomic(filepath.Join(chartDir, d), web); err != nil {
			return nil, err
		}
	}
	// RUDDER_BENCH_SSA=1: the Web kind installs server-side (install.serverSideApply), for the
	// comparison with client-side apply in docs/bench.md.
	ssa := ""
	if os.Getenv("RUDDER_BENCH_SSA") != "" {
		ssa = ", install: {serverSideApply: true}"
	}
	wf := filepath.Join(chartDir, "watches.yaml")
	if err := os.WriteFile(wf, []byte(fmt.Sprintf(`
- {group: bench.rudder.dev, version: v1, kind: Web, chart: web, reconcilePeriod: %s%s}
- {group: bench.rudder.dev, version: v1, kind: Site10, chart: site10}
- {group: bench.rudder.dev, version: v1, kind: Site100, chart: site100}
- {group: bench.rudder.dev, version: v1, kind: Crowd, chart: crowd}
- {group: bench.rudder.dev, version: v1, kind: Db20, chart: db20}
- {group: bench.rudder.dev, version: v1, kind: App200, chart: app200, dependsOn: {kinds: [{kind: Db20}]}}
- {group: bench.rudder.dev, version: v1, kind: Wave100, chart: wave100, rollout: {waves: [{count: 1}, {percent: 25}]}}
- {group: bench.rudder.dev, version: v1, kind: Shared100, chart: shared100, reconcilePeriod: %s, valuesFrom: [{kind: ConfigMap, name: shared}]}
`, resyncPeriod, ssa, resyncPeriod)), 0o644); err != nil {
		return nil, err
	}
	return watches.Load(wf)
}

// countRequests counts the API requests rudder sends that change something (writes), and
// tallies every request but watches by verb and resource (logged by BenchmarkConverge300).
type countRequests struct{ rt http.RoundTripper }

var (
	requestsMu sync.Mutex
	requestsBy = map[string]int{}
)

func (c countRequests) RoundTrip(r *http.Request) (*http.Response, error) {
	verb := r.Method
	if r.URL.Query().Get("watch") != "true" {
		requests.Add(1)
	}
	switch r.Method {
	case http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete:
		writes.Add(1)
	case http.MethodGet:
		if r.URL.Query().Get("watch") == "true" {
			return c.rt.RoundTrip(r)
		}
	default:
		return c.rt.RoundTrip(r)
	}
	// .../namespaces/<ns>/<resource>[/<name>[/<subresource>]] → "<resource>[/<subresource>]"
	parts := strings.Split(strings.Trim(r.URL.Path, "/"), "/")
	res := parts[len(parts)-1]
	for i, p := range parts {
		if p == "namespaces" && i+2 < len(parts) {
			rest := parts[i+2:]
			res = rest[0]
			if len(rest) == 3 {
				res += "/" + rest[2]
			}
			if verb == http.MethodGet && len(rest) == 1 {
				verb = "LIST"
			}
			break
		}
	}
	requestsMu.Lock()
	requestsBy[verb+" "+res]++
	requestsMu.Unlock()
	return c.rt.RoundTrip(r)
}

// clearRequests starts a new tally of rudder's requests by verb and resource.
func clearRequests() {
	requestsMu.Lock()
	clear(requestsBy)
	requestsMu.Unlock()
}

// printRequests prints the tally of rudder's requests since clearRequests.
func printRequests(when string) {
	requestsMu.Lock()
	defer requestsMu.Unlock()
	for _, k := range slices.Sorted(maps.Keys(requestsBy)) {
		fmt.Printf("rudder's requests %s: %5d %s\n", when, requestsBy[k], k)
	}
}

func onlyOnce(b *testing.B) {
	if b.N > 1 {
		b.Fatal("each benchmark is one scenario: run with -benchtime 1x (make bench)")
	}
}

// cpuTime is this process's user+system CPU time.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// procStat is what /proc/<pid>/stat says of a process: its command name, its parent and the
// CPU time (user+system) it used so far.
type procStat struct {
	comm string
	ppid int
	cpu  time.Duration
	// children is the CPU time of the children it waited for (cutime+cstime).
	children time.Duration
}

// readProcStat reads /proc/<pid>/stat; false when the process is gone or the file is not what
// Linux writes.
func readProcStat(pid int) (procStat, bool) {
	raw, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return procStat{}, false
	}
	// pid (comm) state ppid … utime(14) stime(15), counted after the closing parenthesis (comm
	// may hold spaces and parentheses).
	s := string(raw)
	open, closing := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
	if open < 0 || closing < open {
		return procStat{}, false
	}
	f := strings.Fields(s[closing+1:])
	if len(f) < 15 {
		return procStat{}, false
	}
	ppid, _ := strconv.Atoi(f[1])
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	cut, _ := strconv.ParseInt(f[13], 10, 64)
	cst, _ := strconv.ParseInt(f[14], 10, 64)
	return procStat{comm: s[open+1 : closing], ppid: ppid, cpu: time.Duration(ut+st) * time.Second / 100, // USER_HZ
		children: time.Duration(cut+cst) * time.Second / 100}, true
}

// procStats is readProcStat of every process, by pid.
func procStats(b *testing.B) map[int]procStat {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		b.Fatal(err)
	}
	procs := map[int]procStat{}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if st, ok := readProcStat(pid); ok {
			procs[pid] = st
		}
	}
	return procs
}

// childCPU is the CPU time (user+system) each descendant process of this one has used so far,
// by command name: the control plane's components, to show where the cores went.
func childCPU(b *testing.B) map[string]time.Duration {
	procs := procStats(b)
	self := os.Getpid()
	out := map[string]time.Duration{}
	for _, p := range procs {
		for a := p.ppid; a > 1; a = procs[a].ppid {
			if a == self {
				out[p.comm] += p.cpu
				break
			}
			if _, ok := procs[a]; !ok {
				break
			}
		}
	}
	return out
}

// cpuProfile starts a CPU profile of this process into the file the environment variable env
// names, if it names one, and returns the function that stops it.
func cpuProfile(b *testing.B, env string) (stop func()) {
	path := os.Getenv(env)
	if path == "" {
		return func() {}
	}
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		b.Fatal(err)
	}
	return func() { pprof.StopCPUProfile(); f.Close() }
}

// allocsProfile writes the heap profile of the process's allocations so far to the path env
// names plus ".base", and returns a function that writes it again to the path: their
// difference (go tool pprof -diff_base) is what was allocated in between.
func allocsProfile(b *testing.B, env string) (stop func()) {
	path := os.Getenv(env)
	if path == "" {
		return func() {}
	}
	writeAllocs(b, path+".base")
	return func() { writeAllocs(b, path) }
}

// writeAllocs writes the heap profile of the process's allocations so far to path.
func writeAllocs(b *testing.B, path string) {
	runtime.GC() // the profile is as of the last collection
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	if err := pprof.Lookup("allocs").WriteTo(f, 0); err != nil {
		b.Fatal(err)
	}
}

// apiserverProfile starts a CPU profile of kube-apiserver (its /debug/pprof endpoint) for d and
// returns a function that waits for it and writes it to path.
func apiserverProfile(b *testing.B, cfg *rest.Config, path string, d time.Duration) (wait func()) {
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		b.Fatal(err)
	}
	url := fmt.Sprintf("%s/debug/pprof/profile?seconds=%d", strings.TrimSuffix(cfg.Host, "/"), int(d.Seconds()))
	return fetchProfile(b, hc, url, path, "kube-apiserver profile")
}

// fetchProfile GETs a /debug/pprof URL in the background into path; wait returns once it is
// written, and reports a failure as what.
func fetchProfile(b *testing.B, hc *http.Client, url, path, what string) (wait func()) {
	done := make(chan error, 1)
	go func() {
		resp, err := hc.Get(url)
		if err != nil {
			done <- err
			return
		}
		defer resp.Body.Close()
		f, err := os.Create(path)
		if err != nil {
			done <- err
			return
		}
		_, err = io.Copy(f, resp.Body)
		done <- errors.Join(err, f.Close())
	}()
	return func() {
		if err := <-done; err != nil {
			b.Errorf("%s: %v", what, err)
		}
	}
}

// cpuSnapshot is childCPU plus this process's own CPU time under "bench" (rudder and the harness).
func cpuSnapshot(b *testing.B) map[string]time.Duration {
	m := childCPU(b)
	m["bench"] = cpuTime(b)
	return m
}

// cpuDelta is after − before, per process name.
func cpuDelta(before, after map[string]time.Duration) map[string]time.Duration {
	d := map[string]time.Duration{}
	for k, v := range after {
		d[k] = v - before[k]
	}
	return d
}

// metricSum adds up a counter (or a histogram's count) over the series whose labels contain
// every label=value in match.
func metricSum(b *testing.B, name string, match map[string]string) float64 {
	fams, err := metrics.Registry.Gather()
	if err != nil {
		b.Fatal(err)
	}
	var sum float64
	for _, f := range fams {
		if f.GetName() != name {
			continue
		}
	series:
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			for k, v := range match {
				if !strings.Contains(labels[k], v) {
					continue series
				}
			}
			switch {
			case m.GetCounter() != nil:
				sum += m.GetCounter().GetValue()
			case m.GetHistogram() != nil:
				sum += float64(m.GetHistogram().GetSampleCount())
			case m.GetGauge() != nil:
				sum += m.GetGauge().GetValue()
			}
		}
	}
	return sum
}

func namespace(b *testing.B, name string) {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if err := k8s.Create(context.Background(), ns); err != nil {
		b.Fatal(err)
	}
}

// deleteNamespace deletes a namespace and waits until it and everything in it is gone.
func deleteNamespace(b *testing.B, name string) {
	ctx := context.Background()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if err := k8s.Delete(ctx, ns); err != nil {
		b.Fatal(err)
	}
	for start := time.Now(); ; time.Sleep(250 * time.Millisecond) {
		err := k8s.Get(ctx, client.ObjectKeyFromObject(ns), ns)
		if apierrors.IsNotFound(err) {
			return
		}
		if err != nil {
			b.Fatal(err)
		}
		if time.Since(start) > 5*time.Minute {
			b.Fatalf("namespace %s still there after 5 minutes", name)
		}
	}
}

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

// parallel runs f(0..n-1) on `workers` goroutines.
func parallel(n int, f func(ctx context.Context, i int) error) error {
	g, ctx := errgroup.WithContext(context.Background())
	g.SetLimit(envInt("RUDDER_BENCH_CLIENTS", workers))
	for i := range n {
		g.Go(func() error { return f(ctx, i) })
	}
	return g.Wait()
}

// count lists the CRs of gvk in ns from c (an informer cache: no API request per poll) and
// counts those for which ok holds.
func count(b *testing.B, c client.Reader, gvk schema.GroupVersionKind, ns string, ok func(u *unstructured.Unstructured) bool) int {
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
	if err := c.List(context.Background(), list, client.InNamespace(ns), client.UnsafeDisableDeepCopy); err != nil {
		b.Fatal(err)
	}
	n := 0
	for i := range list.Items {
		if ok(&list.Items[i]) {
			n++
		}
	}
	return n
}

// waitAll waits until n CRs of gvk in ns satisfy ok, and returns how long that took from start.
func waitAll(b *testing.B, what string, start time.Time, timeout time.Duration, gvk schema.GroupVersionKind, ns string, n int, ok func(u *unstructured.Unstructured) bool) time.Duration {
	pts := curve(b, what, start, n, timeout, 100*time.Millisecond, func() int { return count(b, crs, gvk, ns, ok) })
	return pts[len(pts)-1].t
}

// condStatus reads a condition's status without copying the object (the harness polls 300
// CRs every 100 ms; crtest.Condition's deep copies would be most of its CPU).
func condStatus(u *unstructured.Unstructured, typ string) (status string, observedGeneration int64) {
	st, _ := u.Object["status"].(map[string]any)
	conds, _ := st["conditions"].([]any)
	for _, c := range conds {
		m, _ := c.(map[string]any)
		if m["type"] == typ {
			s, _ := m["status"].(string)
			g, _ := m["observedGeneration"].(int64)
			return s, g
		}
	}
	return "", 0
}

func released(revision int64) func(u *unstructured.Unstructured) bool {
	return func(u *unstructured.Unstructured) bool {
		st, _ := u.Object["status"].(map[string]any)
		rel, _ := st["release"].(map[string]any)
		rev, _ := rel["revision"].(int64)
		s, _ := condStatus(u, "Released")
		return rev == revision && s == "True"
	}
}

func ready(u *unstructured.Unstructured) bool {
	s, g := condStatus(u, "Ready")
	return s == "True" && g == u.GetGeneration()
}

func newCR(gvk schema.GroupVersionKind, ns, name string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"replicas": int64(1), "port": int64(8080)}}}
	u.SetGroupVersionKind(gvk)
	u.SetNamespace(ns)
	u.SetName(name)
	return u
}

// renderWeb renders the web chart for release name in ns, as Helm would for a CR (of spec
// newCR's, with extra's fields): the release and its objects.
func renderWeb(b *testing.B, name, ns string, extra ...map[string]any) (*release.Release, []*unstructured.Unstructured) {
	ch, err := loader.Load("testdata/charts/web")
	if err != nil {
		b.Fatal(err)
	}
	inst := action.NewInstall(action.NewConfiguration())
	inst.DryRunStrategy, inst.ReleaseName, inst.Namespace = action.DryRunClient, name, ns
	inst.KubeVersion = &common.KubeVersion{Version: "v1.37.2", Major: "1", Minor: "37"}
	vals := map[string]any{"replicas": 1, "port": 8080}
	for _, e := range extra {
		maps.Copy(vals, e)
	}
	rel, err := records.V1Of(inst.Run(ch, vals))
	if err != nil {
		b.Fatal(err)
	}
	var objs []*unstructured.Unstructured
	for _, doc := range releaseutil.SplitManifests(rel.Manifest) {
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal([]byte(doc), &u.Object); err != nil {
			b.Fatal(err)
		}
		if len(u.Object) == 0 {
			continue
		}
		u.SetNamespace(ns)
		objs = append(objs, u)
	}
	return rel, objs
}

// waitAvailable waits until n Deployments in ns are available, from start.
func waitAvailable(b *testing.B, ns string, start time.Time, n int) time.Duration {
	for {
		var list appsv1.DeploymentList
		if err := crs.List(context.Background(), &list, client.InNamespace(ns), client.UnsafeDisableDeepCopy); err != nil {
			b.Fatal(err)
		}
		got := 0
		for i := range list.Items {
			if list.Items[i].Status.AvailableReplicas >= 1 {
				got++
			}
		}
		if got >= n {
			return time.Since(start)
		}
		if time.Since(start) > 10*time.Minute {
			b.Fatalf("%d of %d Deployments available in %s", got, n, ns)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

var (
	fleetOnce  sync.Once
	fleetStats struct {
		direct, directReady, released, ready time.Duration
		writes                               int64
		passes                               float64 // reconcile passes, until all Ready
		// CPU used by each process while the direct client stored its objects, and while
		// rudder converged the fleet (until every release was deployed).
		cpuDirect, cpuFloor, cpuRudder map[string]time.Duration
		floor                          time.Duration
	}
)

// ensureFleet converges the 300 Web CRs once per run (BenchmarkConverge300 measures it; the
// benchmarks after it need the fleet).
func ensureFleet(b *testing.B) {
	fleetOnce.Do(func() {
		// Baseline: the same 600 objects, rendered beforehand, stored by a plain client with
		// rudder's parallelism.
		namespace(b, "direct")
		var objs []*unstructured.Unstructured
		for i := range fleet {
			_, o := renderWeb(b, fmt.Sprintf("web-%03d", i), "direct")
			objs = append(objs, o...)
		}
		cpu0 := cpuSnapshot(b)
		start := time.Now()
		if err := parallel(len(objs), func(ctx context.Context, i int) error { return k8s.Create(ctx, objs[i]) }); err != nil {
			b.Fatal(err)
		}
		fleetStats.direct = time.Since(start)
		fleetStats.cpuDirect = cpuDelta(cpu0, cpuSnapshot(b))
		// The cluster's own time to run them (and to be idle again before rudder's turn).
		fleetStats.directReady = waitAvailable(b, "direct", start, fleet)
		// The harness's own Deployment informer is done: it would otherwise decode every
		// Deployment update in this process during the idle measurement.
		if err := crs.RemoveInformer(context.Background(), &appsv1.Deployment{}); err != nil {
			b.Fatal(err)
		}
		// rudder's turn starts from the same cluster as the baseline's: without the baseline's
		// 300 Deployments, ReplicaSets, Pods and Services, which would otherwise make every
		// component (and the API server's heap) busier for whichever measurement runs second.
		deleteNamespace(b, "direct")

		// The protocol floor: rudder's requests without rudder (see protocolFloor).
		namespace(b, "floor")
		reqs := prepareFloor(b, "floor")
		cpu0 = cpuSnapshot(b)
		fleetStats.floor = protocolFloor(b, "floor", reqs)
		fleetStats.cpuFloor = cpuDelta(cpu0, cpuSnapshot(b))
		releaseFloor(b, reqs)
		deleteNamespace(b, "floor")

		// rudder: from the first CR create to every release deployed, then every CR Ready.
		namespace(b, "fleet")
		w0 := writes.Load()
		p0 := metricSum(b, "controller_runtime_reconcile_total", map[string]string{"controller": "web.bench.rudder.dev"})
		clearRequests()
		defer cpuProfile(b, "RUDDER_BENCH_CONVERGE_PROFILE")()
		if path := os.Getenv("RUDDER_BENCH_APISERVER_PROFILE"); path != "" {
			defer apiserverProfile(b, cluster.Config, path, 15*time.Second)()
		}
		cpu0 = cpuSnapshot(b)
		start = time.Now()
		if err := parallel(fleet, func(ctx context.Context, i int) error {
			return k8s.Create(ctx, newCR(webGVK, "fleet", fmt.Sprintf("web-%03d", i)))
		}); err != nil {
			b.Fatal(err)
		}
		fleetStats.released = waitAll(b, "releases deployed", start, 10*time.Minute, webGVK, "fleet", fleet, released(1))
		fleetStats.cpuRudder = cpuDelta(cpu0, cpuSnapshot(b))
		if path := os.Getenv("RUDDER_BENCH_ALLOCS_PROFILE"); path != "" {
			writeAllocs(b, path)
		}
		fleetStats.ready = waitAll(b, "CRs Ready", start, 10*time.Minute, webGVK, "fleet", fleet, ready)
		fleetStats.writes = writes.Load() - w0
		fleetStats.passes = metricSum(b, "controller_runtime_reconcile_total", map[string]string{"controller": "web.bench.rudder.dev"}) - p0
		printRequests("while converging")
	})
	if fleetStats.ready == 0 {
		b.Fatal("the fleet did not converge")
	}
}

func BenchmarkConverge300(b *testing.B) {
	onlyOnce(b)
	ensureFleet(b)
	b.ReportMetric(fleetStats.direct.Seconds(), "s-direct-store")
	b.ReportMetric(fleetStats.directReady.Seconds(), "s-direct-available")
	b.ReportMetric(fleetStats.released.Seconds(), "s-all-released")
	b.ReportMetric(fleetStats.ready.Seconds(), "s-all-ready")
	b.ReportMetric(fleetStats.released.Seconds()/fleetStats.direct.Seconds(), "x-direct")
	b.ReportMetric(fleetStats.floor.Seconds(), "s-floor")
	b.ReportMetric(fleetStats.floor.Seconds()/fleetStats.direct.Seconds(), "x-floor-direct")
	b.ReportMetric(float64(fleetStats.writes)/fleet, "api-writes/CR")
	b.ReportMetric(fleetStats.passes/fleet, "passes/CR")
	// The control plane's CPU time in each phase, as a ratio to the direct phase's: the work
	// each way of converging costs the cluster, steadier than the wall-clock ratio.
	controlPlane := func(m map[string]time.Duration) (t time.Duration) {
		for name, d := range m {
			if name != "bench" {
				t += d
			}
		}
		return t
	}
	b.ReportMetric(controlPlane(fleetStats.cpuRudder).Seconds()/controlPlane(fleetStats.cpuDirect).Seconds(), "x-cp-cpu-direct")
	b.ReportMetric(controlPlane(fleetStats.cpuFloor).Seconds()/controlPlane(fleetStats.cpuDirect).Seconds(), "x-cp-cpu-floor-direct")
	for _, phase := range []struct {
		name string
		cpu  map[string]time.Duration
	}{{"direct", fleetStats.cpuDirect}, {"floor", fleetStats.cpuFloor}, {"rudder", fleetStats.cpuRudder}} {
		for _, comm := range slices.Sorted(maps.Keys(phase.cpu)) {
			b.ReportMetric(phase.cpu[comm].Seconds(), "cpu-s-"+phase.name+"-"+comm)
		}
	}
	b.ReportMetric(0, "ns/op")
}

func BenchmarkIdleResync300(b *testing.B) {
	onlyOnce(b)
	ensureFleet(b)
	time.Sleep(3 * time.Second) // let the last readiness passes settle
	web := map[string]string{"gvk": "Web."}
	ctrlName := map[string]string{"controller": "web.bench.rudder.dev"}
	w0, a0 := writes.Load(), metricSum(b, "rudder_release_actions_total", web)
	s0 := metricSum(b, "rudder_status_writes_total", web)
	p0 := metricSum(b, "controller_runtime_reconcile_total", ctrlName)
	c0, m0 := cpuTime(b), heapAllocs()
	defer cpuProfile(b, "RUDDER_BENCH_IDLE_PROFILE")()
	defer allocsProfile(b, "RUDDER_BENCH_IDLE_ALLOCS")()
	// One reconcile period plus its jitter (±10%) and its step (a twelfth, see periodic in
	// controllers): every CR is resynced at least once.
	time.Sleep(resyncPeriod + resyncPeriod/5)
	cpu, m := cpuTime(b)-c0, heapAllocs()
	m.objects, m.bytes = m.objects-m0.objects, m.bytes-m0.bytes
	w, a := writes.Load()-w0, metricSum(b, "rudder_release_actions_total", web)-a0
	s := metricSum(b, "rudder_status_writes_total", web) - s0
	p := metricSum(b, "controller_runtime_reconcile_total", ctrlName) - p0

	b.ReportMetric(p, "passes")
	b.ReportMetric(float64(w), "api-writes")
	b.ReportMetric(s, "status-writes")
	b.ReportMetric(a, "helm-actions")
	b.ReportMetric(float64(cpu.Microseconds())/1000/fleet, "cpu-ms/CR")
	b.ReportMetric(float64(cpu.Microseconds())/1000/p, "cpu-ms/pass")
	// The process's allocations over the window per pass: steadier than its CPU time, and
	// what the CPU of a pass follows (the test's own informers allocate a little too).
	b.ReportMetric(float64(m.objects)/p, "allocs/pass")
	b.ReportMetric(float64(m.bytes)/p/1024, "KiB/pass")
	b.ReportMetric(0, "ns/op")
	if p < fleet {
		b.Errorf("only %v passes in one reconcile period of %d CRs", p, fleet)
	}
	if w != 0 || a != 0 {
		b.Errorf("an idle resync wrote: %d API writes, %v Helm actions", w, a)
	}
}

// allocs counts what the Go runtime allocated on the heap since the process started.
type allocs struct{ objects, bytes uint64 }

func heapAllocs() allocs {
	samples := []runtimemetrics.Sample{{Name: "/gc/heap/allocs:objects"}, {Name: "/gc/heap/allocs:bytes"}}
	runtimemetrics.Read(samples)
	return allocs{samples[0].Value.Uint64(), samples[1].Value.Uint64()}
}

func heapMB() float64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return float64(ms.HeapAlloc) / (1 << 20)
}

func BenchmarkMemorySecrets(b *testing.B) {
	onlyOnce(b)
	ensureFleet(b)
	const n, size = 3000, 4 << 10
	before := heapMB()
	namespace(b, "noise")
	payload := []byte(strings.Repeat("x", size))
	if err := parallel(n, func(ctx context.Context, i int) error {
		return k8s.Create(ctx, &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: "noise", Name: fmt.Sprintf("s-%04d", i)},
			Data:       map[string][]byte{"payload": payload},
		})
	}); err != nil {
		b.Fatal(err)
	}
	time.Sleep(5 * time.Second)
	after := heapMB()
	secretsMB := float64(n*size) / (1 << 20)
	b.ReportMetric(before, "heap-MB-before")
	b.ReportMetric(after, "heap-MB-after")
	b.ReportMetric(secretsMB, "secrets-MB")
	b.ReportMetric(0, "ns/op")
	if after-before > secretsMB/2 {
		b.Errorf("heap grew %.1f MB with %.1f MB of unrelated Secrets", after-before, secretsMB)
	}
}

func BenchmarkChartReload(b *testing.B) {
	for _, n := range []int{10, 100} {
		b.Run(fmt.Sprintf("N=%d", n), func(b *testing.B) {
			onlyOnce(b)
			kind := fmt.Sprintf("Site%d", n)
			gvk := webGVK.GroupVersion().WithKind(kind)
			ns := strings.ToLower(kind)
			start := installedThenEdited(b, gvk, ns, "site", n)
			took := waitAll(b, "upgraded", start, 5*time.Minute, gvk, ns, n, released(2))
			b.ReportMetric(took.Seconds(), "s-change-to-all-upgraded")
			// What an upgrade asks of the API server, per verb and resource.
			printRequests(fmt.Sprintf("while %d CRs upgraded", n))
			b.ReportMetric(0, "ns/op")
		})
	}
}

// installedThenEdited makes n CRs of gvk (prefix-000, …) in namespace ns, waits until every one
// is installed, then edits the web chart of the kind's volume (chartDir/ns: an annotation on
// the Deployment) and returns when the edit was published.
func installedThenEdited(b *testing.B, gvk schema.GroupVersionKind, ns, prefix string, n int) time.Time {
	b.Helper()
	namespace(b, ns)
	if err := parallel(n, func(ctx context.Context, i int) error {
		return k8s.Create(ctx, newCR(gvk, ns, fmt.Sprintf("%s-%03d", prefix, i)))
	}); err != nil {
		b.Fatal(err)
	}
	waitAll(b, "installed", time.Now(), 5*time.Minute, gvk, ns, n, released(1))
	files, err := chartsourcetest.ReadDir("testdata/charts/web")
	if err != nil {
		b.Fatal(err)
	}
	files["templates/deployment.yaml"] = strings.Replace(files["templates/deployment.yaml"],
		"  name: {{ .Release.Name }}\n", "  name: {{ .Release.Name }}\n  annotations: {bench.rudder.dev/edited: \"true\"}\n", 1)
	clearRequests()
	start := time.Now()
	if err := chartsourcetest.PublishAtomic(filepath.Join(chartDir, ns), files); err != nil {
		b.Fatal(err)
	}
	return start
}

// BenchmarkValuesFromEdit: 100 CRs read one ConfigMap (valuesFrom); its edit upgrades each
// once (to revision 2, beside BenchmarkChartReload's chart edit), and then a reconcile period
// of the 100 idle CRs sends no request at all: the source is read from its watch's cache.
func BenchmarkValuesFromEdit(b *testing.B) {
	onlyOnce(b)
	const n = 100
	gvk := webGVK.GroupVersion().WithKind("Shared100")
	ns := "shared100"
	namespace(b, ns)
	shared := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "shared"}, Data: map[string]string{"values.yaml": "image: nginx:1.27.3\n"}}
	if err := k8s.Create(context.Background(), shared); err != nil {
		b.Fatal(err)
	}
	if err := parallel(n, func(ctx context.Context, i int) error {
		return k8s.Create(ctx, newCR(gvk, ns, fmt.Sprintf("shared-%03d", i)))
	}); err != nil {
		b.Fatal(err)
	}
	waitAll(b, "installed", time.Now(), 5*time.Minute, gvk, ns, n, released(1))

	// A value no template reads: a new revision with the same objects, as the chart edit of
	// BenchmarkChartReload (an annotation) rolls no Pod either.
	shared.Data["values.yaml"] = "image: nginx:1.27.3\nnote: edited\n"
	start := time.Now()
	if err := k8s.Update(context.Background(), shared); err != nil {
		b.Fatal(err)
	}
	took := waitAll(b, "upgraded", start, 5*time.Minute, gvk, ns, n, released(2))
	b.ReportMetric(took.Seconds(), "s-change-to-all-upgraded")
	var records corev1.SecretList
	if err := k8s.List(context.Background(), &records, client.InNamespace(ns), client.MatchingLabels{"owner": "helm"}); err != nil {
		b.Fatal(err)
	}
	if len(records.Items) != 2*n {
		b.Errorf("%d revisions after one edit of the source read by %d CRs, want %d: one upgrade each", len(records.Items), n, 2*n)
	}

	// The passes the upgrades' own watch events cause (the operands' updates, each checked for
	// drift once) are over when no pass has run for 5 s: only then is the kind idle.
	ctrlName := map[string]string{"controller": "shared100.bench.rudder.dev"}
	for last, quiet := -1.0, time.Now(); time.Since(quiet) < 5*time.Second; time.Sleep(time.Second) {
		if p := metricSum(b, "controller_runtime_reconcile_total", ctrlName); p != last {
			last, quiet = p, time.Now()
		}
	}
	by0 := requestTally()
	r0, w0, p0 := requests.Load(), writes.Load(), metricSum(b, "controller_runtime_reconcile_total", ctrlName)
	time.Sleep(resyncPeriod + resyncPeriod/5)
	r, w, p := requests.Load()-r0, writes.Load()-w0, metricSum(b, "controller_runtime_reconcile_total", ctrlName)-p0
	by := requestTally()
	for k, v := range by0 {
		if by[k] -= v; by[k] == 0 {
			delete(by, k)
		}
	}
	sourceReads := by["GET configmaps"] + by["LIST configmaps"]
	b.ReportMetric(p, "idle-passes")
	b.ReportMetric(float64(r), "idle-api-requests")
	b.ReportMetric(float64(sourceReads), "idle-source-reads")
	b.ReportMetric(0, "ns/op")
	b.Logf("requests in the idle period: %v", by)
	if p < n {
		b.Errorf("only %v passes in one reconcile period of %d CRs", p, n)
	}
	// The source is read from its watch's cache; a pass that checks drift (an operand's own
	// update marked it) reads the live operands and the manifest, as without valuesFrom.
	if sourceReads != 0 || w != 0 {
		b.Errorf("an idle resync of CRs with a values source read the source %d times and wrote %d times: %v", sourceReads, w, by)
	}
}

// requestTally is a copy of requestsBy.
func requestTally() map[string]int {
	requestsMu.Lock()
	defer requestsMu.Unlock()
	return maps.Clone(requestsBy)
}
