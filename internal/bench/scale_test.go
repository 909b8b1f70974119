package bench_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rudder-operator/rudder/internal/chartsource/chartsourcetest"
	"github.com/rudder-operator/rudder/internal/crtest"
	"github.com/rudder-operator/rudder/internal/testcluster"
	"github.com/rudder-operator/rudder/internal/wiring"
)

// BenchmarkScale runs rudder as a process of its own, built from this checkout and started as
// a cluster would start it, over N CRs of the bench chart (a Deployment and a Service), for
// N = 300 and 2000 (RUDDER_BENCH_SCALE="300,2000" overrides; "2000/100" spreads the N CRs, and
// the direct store's objects, over 100 namespaces, round robin). Each N gets a minimal control
// plane of its own (etcd and kube-apiserver, no controller manager: nothing else competes),
// and every process shares every core, as rudder shares nodes with the API server on small
// clusters:
//
//   - convergence: from the first create to every release deployed, in CR/s, and the same N
//     Deployments and Services stored directly by a plain client with rudder's parallelism;
//   - rudder's CPU (utime+stime from /proc) per install while converging, and over an idle
//     window of 75 s (one reconcile period of main.go's default, 1 minute, and a quarter): per
//     pass, and per CR with its render workers counted (idle-cpu-ms/CR/75s, the idle floor
//     issue 36 names); and the API server's per install while converging, which
//     serves the same requests whatever rudder's own cost: rudder's over it is a figure that
//     holds on a machine whose speed varies with its host's load; the API server's CPU per CR
//     while the plain client stores the same objects (apiserver-cpu-ms/direct-CR), what the
//     objects alone cost it at that N; and rudder's reconcile passes and status writes per CR
//     while converging;
//   - rudder's RSS and Go heap after the idle period, and their growth per CR over the same
//     process with no CR; the RSS with no CR also split into anonymous and file pages (see
//     resident); how the Go runtime accounts for it (heap in use, heap held idle, stacks,
//     and next-gc-MiB, the heap size of the next collection: twice the live heap, the figure
//     that follows the live heap where RSS moves with the collector's cycle); rudder's peak
//     RSS; and the proportional set of rudder and its render workers together, in all and
//     over N (pss-with-workers-KiB/CR: issue 36's "memory (rudder + workers, PSS)");
//   - a chart edit (another image): the time until every CR runs it, rudder's and the API
//     server's CPU per upgrade, and the time between the first and the last namespace done.
//
// RUDDER_BENCH_SCALE_HEADLESS=1 makes the Services headless (see scaleSpec).
//
// The curves of the largest N — releases deployed over time, rudder's and the direct store's —
// go to docs/bench-scale.svg. RUDDER_BENCH_SCALE_PROFILE=dir writes, for each N, rudder's CPU
// profile over the first 30 s of convergence (scale-N-converge.pprof) and over the idle window
// (scale-N-idle.pprof), what it allocated over the idle window (scale-N-idle-allocs.pprof), and
// its heap at the end: as the last collection found it, which set
// the heap goal (scale-N-heap-lastgc.pprof), and live, after a forced collection
// (scale-N-heap.pprof), from its --pprof-bind-address.
func BenchmarkScale(b *testing.B) {
	var largest *scaleRun
	for _, size := range scaleSizes() {
		n := size.n
		name := fmt.Sprintf("N=%d", n)
		if size.spread > 1 {
			name += fmt.Sprintf(",namespaces=%d", size.spread)
		}
		b.Run(name, func(b *testing.B) {
			onlyOnce(b)
			r := runScale(b, size)
			b.ReportMetric(r.rate, "CR/s")
			b.ReportMetric(r.firstHalf, "CR/s-first-half")
			b.ReportMetric(r.secondHalf, "CR/s-second-half")
			b.ReportMetric(r.edit.Seconds(), "s-chart-edit")
			b.ReportMetric(float64(n)/r.edit.Seconds(), "CR/s-chart-edit")
			b.ReportMetric(r.editCPU.Seconds()*1000/float64(n), "cpu-ms/upgrade")
			b.ReportMetric(r.editAPIServerCPU.Seconds()*1000/float64(n), "apiserver-cpu-ms/upgrade")
			b.ReportMetric(r.namespaceSpread.Seconds(), "s-namespace-spread")
			b.ReportMetric(r.installLists/float64(n), "lists/install")
			b.ReportMetric(r.upgradeLists/float64(n), "lists/upgrade")
			b.ReportMetric(r.converge.Seconds(), "s-converge")
			b.ReportMetric(r.direct.Seconds(), "s-direct-store")
			b.ReportMetric(r.installCPU.Seconds()*1000/float64(n), "cpu-ms/install")
			b.ReportMetric(r.apiserverCPU.Seconds()*1000/float64(n), "apiserver-cpu-ms/install")
			b.ReportMetric(r.directAPIServerCPU.Seconds()*1000/float64(n), "apiserver-cpu-ms/direct-CR")
			b.ReportMetric(r.renderCPU.Seconds()*1000/float64(n), "render-cpu-ms/install")
			b.ReportMetric(r.workersRSS/(1<<20), "render-workers-rss-MiB")
			b.ReportMetric(r.passes, "passes/CR")
			b.ReportMetric(r.statusWrites, "status-writes/CR")
			b.ReportMetric(r.idleCPU.Seconds()*1000/r.idlePasses, "cpu-ms/idle-pass")
			b.ReportMetric(r.idleWindowCPU.Seconds()*1000/float64(n), "idle-cpu-ms/CR/75s")
			b.ReportMetric(r.idlePasses, "idle-passes")
			b.ReportMetric(r.rss.total/(1<<20), "rss-MiB")
			b.ReportMetric((r.rss.total-r.rss0.total)/1024/float64(n), "rss-KiB/CR")
			b.ReportMetric(r.rss0.total/(1<<20), "rss-MiB-no-CR")
			b.ReportMetric(r.rss0.anon/(1<<20), "rss-anon-MiB-no-CR")
			b.ReportMetric(r.rss0.file/(1<<20), "rss-file-MiB-no-CR")
			b.ReportMetric(r.rss.file/(1<<20), "rss-file-MiB")
			b.ReportMetric(r.rss.peak/(1<<20), "rss-peak-MiB")
			b.ReportMetric(r.heap/(1<<20), "heap-MiB")
			b.ReportMetric(r.runtimeMem.heapInuse/(1<<20), "heap-inuse-MiB")
			b.ReportMetric(r.runtimeMem.heapRetained/(1<<20), "heap-retained-MiB")
			b.ReportMetric(r.runtimeMem.stacks/(1<<20), "stacks-MiB")
			b.ReportMetric(r.runtimeMem.nextGC/(1<<20), "next-gc-MiB")
			b.ReportMetric((r.pss+r.workersPSS)/(1<<20), "pss-with-workers-MiB")
			b.ReportMetric((r.pss+r.workersPSS)/1024/float64(n), "pss-with-workers-KiB/CR")
			b.ReportMetric((r.heap-r.heap0)/1024/float64(n), "heap-KiB/CR")
			b.ReportMetric(0, "ns/op")
			if largest == nil || n > largest.n {
				largest = r
			}
		})
	}
	if largest != nil {
		if err := writeScalePlot(filepath.Join(repoRoot, "docs", "bench-scale.svg"), largest); err != nil {
			b.Fatal(err)
		}
	}
}

// scaleSpec is what the scale CRs' spec (and the direct store's values) set beyond newCR's.
// RUDDER_BENCH_SCALE_HEADLESS=1 makes every Service headless: the API server then allocates
// no ClusterIP, whose allocator (Kubernetes' IPAddress one) lists every allocated address on
// each Service create, a cost per create that grows with the Services in the cluster (61 % of
// the API server's CPU while 10,000 CRs converged in session 18) and that no client of the
// API server can avoid.
var scaleSpec = func() map[string]any {
	if os.Getenv("RUDDER_BENCH_SCALE_HEADLESS") != "" {
		return map[string]any{"clusterIP": "None"}
	}
	return map[string]any{}
}()

// scaleSize is one point of BenchmarkScale: n CRs over spread namespaces.
type scaleSize struct{ n, spread int }

func scaleSizes() []scaleSize {
	spec := os.Getenv("RUDDER_BENCH_SCALE")
	if spec == "" {
		return []scaleSize{{300, 1}, {2000, 1}}
	}
	var out []scaleSize
	for _, f := range strings.Split(spec, ",") {
		count, spread, _ := strings.Cut(strings.TrimSpace(f), "/")
		n, err := strconv.Atoi(count)
		s, serr := strconv.Atoi(spread)
		if spread == "" {
			s, serr = 1, nil
		}
		if err == nil && serr == nil && n > 0 && s > 0 {
			out = append(out, scaleSize{n, s})
		}
	}
	return out
}

// namespaces are the spread namespaces of a run, named after prefix.
func (s scaleSize) namespaces(prefix string) []string {
	if s.spread == 1 {
		return []string{fmt.Sprintf("%s-%d", prefix, s.n)}
	}
	out := make([]string, s.spread)
	for i := range out {
		out[i] = fmt.Sprintf("%s-%d-%03d", prefix, s.n, i)
	}
	return out
}

// createNamespaces creates every one of names.
func createNamespaces(b *testing.B, cl client.Client, names []string) {
	for _, ns := range names {
		if err := cl.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			b.Fatal(err)
		}
	}
}

var scaleGVK = schema.GroupVersionKind{Group: "bench.rudder.dev", Version: "v1", Kind: "Scale"}

// scaleReconcilePeriod is the rudder process's --reconcile-period, main.go's default; the idle
// window (idleWindow) holds one of it and a quarter (each CR passes once or twice: the period is
// jittered by up to a tenth).
const (
	scaleReconcilePeriod = time.Minute
	idleWindow           = 75 * time.Second
)

// point is a curve's point: releases deployed (or CRs stored) after t.
type point struct {
	t time.Duration
	n int
}

type scaleRun struct {
	n                   int
	converge, direct    time.Duration
	rate                float64
	installCPU, idleCPU time.Duration
	// installLists and upgradeLists are the LISTs the API server served while the fleet
	// converged and while it took the chart edit: an install or upgrade that LISTs costs the
	// API server a pass over every object of the namespace.
	installLists, upgradeLists float64
	// idleWindowCPU is rudder's CPU over the idle window, its render workers' counted (those
	// that ended in it too).
	idleWindowCPU time.Duration
	// renderCPU is the part of installCPU its render workers used; workersRSS their resident
	// memory after converging, in bytes.
	renderCPU  time.Duration
	workersRSS float64
	// workersPSS is the render workers' proportional set after converging, pss rudder's own
	// after the idle window, in bytes: each process's share of the pages it maps, so the
	// binary rudder and its workers map once is counted once between them (issue 36's table
	// of memory, "rudder + workers, PSS", is their sum).
	workersPSS, pss float64
	// apiserverCPU is the API server's while rudder converged: the same requests whatever
	// rudder's own cost, so a yardstick of how fast this machine ran (its speed varies by up
	// to 2x with the host's load).
	apiserverCPU time.Duration
	// directAPIServerCPU is the API server's while the plain client stored the same objects:
	// what the objects alone cost it at this N, on the same cluster.
	directAPIServerCPU time.Duration
	idlePasses         float64
	// passes and statusWrites are rudder's reconcile passes and CR status patches while it
	// converged, per CR.
	passes, statusWrites float64
	// firstHalf and secondHalf are the pace (CR/s) of the first n/2 releases and of the rest:
	// a pace that falls as the store fills shows as a second half slower than the first.
	firstHalf, secondHalf float64
	// edit is the time from a chart edit until every CR runs it, editCPU rudder's (workers
	// counted) and editAPIServerCPU the API server's meanwhile; namespaceSpread the time between
	// the first and the last namespace to have all its CRs upgraded.
	edit, editCPU, editAPIServerCPU, namespaceSpread time.Duration
	rss0, rss                                        resident
	heap0, heap                                      float64
	// runtimeMem is how the Go runtime accounts for rudder's memory at the end of the idle
	// window (/metrics' go_memstats_*), in bytes: what of its RSS is heap in use, heap held
	// but idle (not yet returned to the kernel), and goroutine stacks, and the heap size at
	// which the next garbage collection starts.
	runtimeMem    struct{ heapInuse, heapRetained, stacks, nextGC float64 }
	rudder, store []point
}

func runScale(b *testing.B, size scaleSize) *scaleRun {
	n := size.n
	c, cl := minimalCluster(b)
	defer func() { _ = c.Stop() }()
	r := &scaleRun{n: n}
	plane := childCPU(b)["kube-apiserver"]
	r.store, r.direct = directStore(b, cl, size)
	r.directAPIServerCPU = childCPU(b)["kube-apiserver"] - plane

	nss := size.namespaces("scale")
	createNamespaces(b, cl, nss)
	// Counted over all namespaces: the CRs are in nss alone.
	ns := ""
	if len(nss) == 1 {
		ns = nss[0]
	}
	p := startRudder(b, c, nss)
	defer p.stop()
	time.Sleep(3 * time.Second) // caches synced, nothing to do
	r.rss0, r.heap0 = p.resident(b), p.metric(b, "go_memstats_heap_alloc_bytes")

	// The harness's cache of the CRs, started before the clock: counting from it costs no API
	// request per poll.
	scaleCRs, err := cache.New(c.Config, cache.Options{Scheme: wiring.Scheme()})
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = scaleCRs.Start(ctx) }()
	if !scaleCRs.WaitForCacheSync(ctx) {
		b.Fatal("the harness's cache did not start")
	}
	count(b, scaleCRs, scaleGVK, ns, released(1)) // its informer for the kind, synced
	convergeProfile := p.profile(b, "profile", "converge", 30*time.Second)
	apiserverEarly := scaleAPIServerProfile(b, c, p.name+"-apiserver-converge", 30*time.Second)
	cpu0, plane0, workers0 := p.cpu(b), childCPU(b)["kube-apiserver"], p.workersCPU(b)
	passes0, writes0 := p.metric(b, "rudder_reconcile_pass_seconds"), p.metric(b, "rudder_status_writes_total")
	lists0 := apiserverLists(b, c)
	start := time.Now()
	go func() {
		if err := parallel(n, func(ctx context.Context, i int) error {
			cr := newCR(scaleGVK, nss[i%len(nss)], fmt.Sprintf("s-%04d", i))
			maps.Copy(cr.Object["spec"].(map[string]any), scaleSpec)
			return cl.Create(ctx, cr)
		}); err != nil {
			b.Error(err)
		}
	}()
	// The second half's profiles, from when half the releases are deployed (where a pace lost
	// at a larger N shows, the store being half full) and the first ones are written: a process
	// takes one CPU profile at a time.
	lateProfiles := make(chan func(), 1)
	go func() {
		for time.Since(start) < 31*time.Second || count(b, scaleCRs, scaleGVK, ns, released(1)) < n/2 {
			time.Sleep(250 * time.Millisecond)
		}
		rudderLate := p.profile(b, "profile", "converge-late", 30*time.Second)
		apiserverLate := scaleAPIServerProfile(b, c, p.name+"-apiserver-converge-late", 30*time.Second)
		lateProfiles <- func() { rudderLate(); apiserverLate() }
	}()
	// 10 minutes, or 120 ms a CR beyond 5,000 (10,000 CRs have taken over 10 minutes here).
	r.rudder = curve(b, "releases deployed", start, n, max(10*time.Minute, time.Duration(n)*120*time.Millisecond), 250*time.Millisecond,
		func() int { return count(b, scaleCRs, scaleGVK, ns, released(1)) })
	r.converge = r.rudder[len(r.rudder)-1].t
	// rudder's CPU includes its render workers' (charts render out of process).
	r.renderCPU = p.workersCPU(b) - workers0
	r.installCPU = p.cpu(b) - cpu0 + r.renderCPU
	r.workersRSS, r.workersPSS = p.workersMemory(b)
	r.apiserverCPU = childCPU(b)["kube-apiserver"] - plane0
	r.rate = float64(n) / r.converge.Seconds()
	r.passes = (p.metric(b, "rudder_reconcile_pass_seconds") - passes0) / float64(n)
	r.statusWrites = (p.metric(b, "rudder_status_writes_total") - writes0) / float64(n)
	r.installLists = apiserverLists(b, c) - lists0

	r.firstHalf, r.secondHalf = halves(r.rudder, n)
	convergeProfile()
	apiserverEarly()
	(<-lateProfiles)()

	time.Sleep(5 * time.Second) // the readiness passes after the installs
	// Every CR resynced at least once.
	idle := idleWindow
	idleProfile := p.profile(b, "profile", "idle", idle)
	idleAllocs := p.profile(b, "allocs", "idle-allocs", idle)
	all1 := p.cpuWithWorkers(b)
	passes1, cpu1 := p.metric(b, "rudder_reconcile_pass_seconds"), p.cpu(b)
	time.Sleep(idle)
	r.idleCPU, r.idlePasses = p.cpu(b)-cpu1, p.metric(b, "rudder_reconcile_pass_seconds")-passes1
	r.idleWindowCPU = p.cpuWithWorkers(b) - all1
	r.rss = p.resident(b)
	if pss, ok := pssOf(b, p.cmd.Process.Pid); ok {
		r.pss = pss
	} else {
		b.Fatalf("/proc/%d/smaps_rollup of rudder: gone, or without Pss", p.cmd.Process.Pid)
	}
	// One scrape for every figure: each allocates in rudder.
	body, err := p.scrape()
	if err != nil {
		b.Fatal(err)
	}
	mem := func(name string) float64 { return crtest.SeriesSum(body, name, nil) }
	r.heap = mem("go_memstats_heap_alloc_bytes")
	r.runtimeMem.heapInuse = mem("go_memstats_heap_inuse_bytes")
	r.runtimeMem.heapRetained = mem("go_memstats_heap_idle_bytes") - mem("go_memstats_heap_released_bytes")
	r.runtimeMem.stacks = mem("go_memstats_stack_inuse_bytes")
	r.runtimeMem.nextGC = mem("go_memstats_next_gc_bytes")
	idleProfile()
	idleAllocs()
	// The heap as the last collection found it, which set next-gc-MiB, then the live heap now.
	p.profile(b, "heap", "heap-lastgc", 0)()
	p.profile(b, "heap?gc=1", "heap", 0)()

	// A chart edit: every CR upgrades once, each namespace's share of the workers taken in turn.
	cpu2, plane2, workers2, lists2 := p.cpu(b), childCPU(b)["kube-apiserver"], p.workersCPU(b), apiserverLists(b, c)
	start = time.Now()
	if err := publishScaleChart(true); err != nil {
		b.Fatal(err)
	}
	r.edit, r.namespaceSpread = upgraded(b, scaleCRs, ns, n, start)
	r.editCPU = p.cpu(b) - cpu2 + p.workersCPU(b) - workers2
	r.editAPIServerCPU = childCPU(b)["kube-apiserver"] - plane2
	r.upgradeLists = apiserverLists(b, c) - lists2
	// Every request an install or upgrade sends is a GET, create, update or patch of a named
	// object (issue 36): a LIST per CR would cost the API server a pass over the namespace.
	// The informers' own LISTs (a relist after a watch expired) are a few in a run.
	if r.installLists > float64(n)/100 || r.upgradeLists > float64(n)/100 {
		b.Errorf("%v LISTs while %d CRs converged and %v while they upgraded: some action LISTs", r.installLists, n, r.upgradeLists)
	}
	return r
}

// apiserverLists is how many LISTs the API server has served (apiserver_request_total).
func apiserverLists(b *testing.B, c *testcluster.Cluster) float64 {
	cs, err := kubernetes.NewForConfig(c.Config)
	if err != nil {
		b.Fatal(err)
	}
	raw, err := cs.RESTClient().Get().AbsPath("/metrics").DoRaw(context.Background())
	if err != nil {
		b.Fatal(err)
	}
	return crtest.SeriesSum(string(raw), "apiserver_request_total", map[string]string{"verb": "LIST"})
}

// publishScaleChart publishes the scale kind's chart: the web chart, or, edited, the web
// chart with another image (an upgrade of every release's Deployment).
func publishScaleChart(edited bool) error {
	files, err := chartsourcetest.ReadDir("testdata/charts/web")
	if err != nil {
		return err
	}
	if edited {
		files["values.yaml"] = strings.Replace(files["values.yaml"], "image: nginx:1.27.3", "image: nginx:1.27.4", 1)
	}
	return chartsourcetest.PublishAtomic(filepath.Join(chartDir, "scale-web"), files)
}

// upgraded waits until the n CRs of ns ("": all) are released at revision 2, and returns how
// long that took from start and the time between the first namespace and the last one to have
// all its CRs there: a queue that serves namespaces fairly keeps it small next to the whole.
func upgraded(b *testing.B, c client.Reader, ns string, n int, start time.Time) (time.Duration, time.Duration) {
	done := map[string]time.Duration{}
	for {
		list := &unstructured.UnstructuredList{}
		list.SetGroupVersionKind(scaleGVK.GroupVersion().WithKind(scaleGVK.Kind + "List"))
		if err := c.List(context.Background(), list, client.InNamespace(ns), client.UnsafeDisableDeepCopy); err != nil {
			b.Fatal(err)
		}
		left, all := map[string]int{}, 0
		for i := range list.Items {
			u := &list.Items[i]
			if !released(2)(u) {
				left[u.GetNamespace()]++
				continue
			}
			all++
			if _, ok := left[u.GetNamespace()]; !ok {
				left[u.GetNamespace()] = 0
			}
		}
		now := time.Since(start)
		for space, l := range left {
			if _, ok := done[space]; !ok && l == 0 {
				done[space] = now
			}
		}
		if all >= n {
			first, last := now, time.Duration(0)
			for _, d := range done {
				first, last = min(first, d), max(last, d)
			}
			return now, last - first
		}
		if now > 20*time.Minute {
			b.Fatalf("chart edit: %d of %d upgraded after %s", all, n, now)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// minimalCluster starts etcd and kube-apiserver with the Scale CRD, every process of it and
// of this benchmark on every core; the affinity this process had is restored when it returns
// (the processes keep theirs).
func minimalCluster(b *testing.B) (*testcluster.Cluster, client.Client) {
	all := make([]int, runtime.NumCPU())
	for i := range all {
		all[i] = i
	}
	if err := pinSelf(all...); err != nil {
		b.Fatal(err)
	}
	if isolateCores() {
		defer func() {
			if err := pinSelf(otherCPUs()...); err != nil {
				b.Fatal(err)
			}
		}()
	}
	opts := testcluster.Options{CRDDirectoryPaths: []string{"testdata/crds/scale.yaml"}}
	c, err := testcluster.Start(context.Background(), opts)
	if err != nil {
		b.Fatal(err)
	}
	cfg := rest.CopyConfig(c.Config)
	cfg.QPS = -1
	cl, err := client.New(cfg, client.Options{Scheme: wiring.Scheme()})
	if err != nil {
		_ = c.Stop()
		b.Fatal(err)
	}
	return c, cl
}

// directStore stores the N Deployments and Services directly, with rudder's parallelism, and
// returns the curve of CRs whose objects are all stored.
func directStore(b *testing.B, cl client.Client, size scaleSize) ([]point, time.Duration) {
	n := size.n
	nss := size.namespaces("direct")
	createNamespaces(b, cl, nss)
	objs := make([][]*unstructured.Unstructured, n)
	for i := range n {
		_, objs[i] = renderWeb(b, fmt.Sprintf("s-%04d", i), nss[i%len(nss)], scaleSpec)
	}
	var mu sync.Mutex
	var pts []point
	start := time.Now()
	if err := parallel(n, func(ctx context.Context, i int) error {
		for _, o := range objs[i] {
			if err := cl.Create(ctx, o); err != nil {
				return err
			}
		}
		mu.Lock()
		pts = append(pts, point{time.Since(start), len(pts) + 1})
		mu.Unlock()
		return nil
	}); err != nil {
		b.Fatal(err)
	}
	return pts, time.Since(start)
}

// curve samples done() every period, from start until it reaches n, and fails the benchmark
// after timeout.
func curve(b *testing.B, what string, start time.Time, n int, timeout, period time.Duration, done func() int) []point {
	var pts []point
	for {
		c := done()
		pts = append(pts, point{time.Since(start), c})
		if c >= n {
			return pts
		}
		if time.Since(start) > timeout {
			b.Fatalf("%s: %d of %d after %s", what, c, n, timeout)
		}
		time.Sleep(period)
	}
}

// rudderProcess is bin/rudder serving the Scale kind in its namespaces.
type rudderProcess struct {
	cmd     *exec.Cmd
	metrics string
	pprof   string // base URL of /debug/pprof, "" unless RUDDER_BENCH_SCALE_PROFILE is set
	name    string
}

// scaleProfiles is the directory of the scale profiles ("": none).
var scaleProfiles = os.Getenv("RUDDER_BENCH_SCALE_PROFILE")

// profile fetches /debug/pprof/<what> (with ?seconds= when d > 0) in the background into
// scale-N-<file>.pprof; wait returns when it is written. A no-op without RUDDER_BENCH_SCALE_PROFILE.
func (p *rudderProcess) profile(b *testing.B, what, file string, d time.Duration) (wait func()) {
	if p.pprof == "" {
		return func() {}
	}
	url := p.pprof + what
	if d > 0 {
		url += fmt.Sprintf("?seconds=%d", int(d.Seconds()))
	}
	return fetchProfile(b, http.DefaultClient, url, filepath.Join(scaleProfiles, p.name+"-"+file+".pprof"), "profile "+what)
}

// buildOnce builds the rudder the scale runs start: this checkout's, or the one at
// RUDDER_BENCH_SCALE_CHECKOUT (a worktree of hack/previous-version, say), so that two builds
// are measured by one harness on one machine.
var buildOnce = sync.OnceValues(func() (string, error) {
	root := repoRoot
	if other := os.Getenv("RUDDER_BENCH_SCALE_CHECKOUT"); other != "" {
		root = other
	}
	return crtest.BuildRudder(root, chartDir)
})

// scaleAPIServerProfile fetches the kube-apiserver's CPU profile over d into
// <RUDDER_BENCH_SCALE_PROFILE>/<file>.pprof in the background; a no-op without it.
func scaleAPIServerProfile(b *testing.B, c *testcluster.Cluster, file string, d time.Duration) (wait func()) {
	if scaleProfiles == "" {
		return func() {}
	}
	return apiserverProfile(b, c.Config, filepath.Join(scaleProfiles, file+".pprof"), d)
}

// halves is the pace of the first n/2 releases of a curve and of the rest, in CR/s.
func halves(pts []point, n int) (first, second float64) {
	total := pts[len(pts)-1].t
	for _, pt := range pts {
		if pt.n >= n/2 {
			return float64(pt.n) / pt.t.Seconds(), float64(n-pt.n) / (total - pt.t).Seconds()
		}
	}
	return 0, 0
}

func startRudder(b *testing.B, c *testcluster.Cluster, nss []string) *rudderProcess {
	ns := nss[0]
	bin, err := buildOnce()
	if err != nil {
		b.Fatal(err)
	}
	// A copy of the web chart of its own, which the chart-edit phase edits.
	if err := publishScaleChart(false); err != nil {
		b.Fatal(err)
	}
	wf := filepath.Join(chartDir, "scale-watches.yaml")
	ssa := "" // RUDDER_BENCH_SSA=1: installed server-side, as in BenchmarkConverge300
	if os.Getenv("RUDDER_BENCH_SSA") != "" {
		ssa = ", install: {serverSideApply: true}"
	}
	if err := os.WriteFile(wf, []byte("- {group: bench.rudder.dev, version: v1, kind: Scale, chart: scale-web"+ssa+"}\n"), 0o644); err != nil {
		b.Fatal(err)
	}
	addr := freeAddr(b)
	pprofAddr := "0"
	if scaleProfiles != "" {
		pprofAddr = freeAddr(b)
		if err := os.MkdirAll(scaleProfiles, 0o755); err != nil {
			b.Fatal(err)
		}
	}
	log, err := os.Create(filepath.Join(chartDir, ns+".log"))
	if err != nil {
		b.Fatal(err)
	}
	// One namespace is watched alone; CRs spread over many are served as a cluster-wide
	// rudder serves its tenants' namespaces: one watch per kind, not one per namespace.
	watched := nss[0]
	if len(nss) > 1 {
		watched = ""
	}
	cmd := exec.Command(bin, "--kubeconfig", c.Kubeconfig, "--watches-file", wf, "--watch-namespace", watched,
		"--metrics-bind-address", addr, "--metrics-secure=false", "--health-probe-bind-address", "0",
		"--reconcile-period", scaleReconcilePeriod.String(), "--zap-log-level", "error",
		"--pprof-bind-address", pprofAddr)
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	p := &rudderProcess{cmd: cmd, metrics: "http://" + addr + "/metrics", name: strings.Replace(ns, "-", "-N=", 1)}
	if pprofAddr != "0" {
		p.pprof = "http://" + pprofAddr + "/debug/pprof/"
	}
	deadline := time.Now().Add(time.Minute)
	for {
		if _, err := p.scrape(); err == nil {
			return p
		} else if time.Now().After(deadline) {
			p.stop()
			b.Fatalf("rudder's metrics did not come up: %v", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// freeAddr is a loopback address with a port free right now.
func freeAddr(b *testing.B) string {
	a, err := testcluster.FreeAddr()
	if err != nil {
		b.Fatal(err)
	}
	return a.String()
}

func (p *rudderProcess) stop() {
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	_ = p.cmd.Wait()
}

// workers are rudder's render workers: its child processes.
func (p *rudderProcess) workers(b *testing.B) []int {
	var out []int
	for pid, st := range procStats(b) {
		if st.ppid == p.cmd.Process.Pid {
			out = append(out, pid)
		}
	}
	return out
}

// workersCPU is the CPU time rudder's live render workers used so far.
func (p *rudderProcess) workersCPU(b *testing.B) time.Duration {
	var total time.Duration
	for _, pid := range p.workers(b) {
		st, _ := readProcStat(pid)
		total += st.cpu
	}
	return total
}

// workersMemory is the resident memory and the proportional set of rudder's render workers,
// in bytes, each read once.
func (p *rudderProcess) workersMemory(b *testing.B) (rss, pss float64) {
	for _, pid := range p.workers(b) {
		// A worker that stopped meanwhile holds nothing.
		r, _ := residentOf(b, pid)
		ps, _ := pssOf(b, pid)
		rss, pss = rss+r.total, pss+ps
	}
	return rss, pss
}

// pssOf is process pid's proportional set size (Pss of /proc/pid/smaps_rollup) in bytes;
// false when the process is gone.
func pssOf(b *testing.B, pid int) (float64, bool) {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/smaps_rollup", pid))
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ESRCH) {
		return 0, false
	}
	if err != nil {
		b.Fatal(err)
	}
	for l := range strings.Lines(string(raw)) {
		v, ok := strings.CutPrefix(l, "Pss:")
		if !ok {
			continue
		}
		return kiloBytes(b, v), true
	}
	return 0, false
}

// cpuWithWorkers is the CPU time of rudder and of its render workers so far: those alive,
// and those it waited for (a worker that ends between two readings is counted whole in the
// second, and in the first for what it had used: the difference is what it used between).
func (p *rudderProcess) cpuWithWorkers(b *testing.B) time.Duration {
	st, ok := readProcStat(p.cmd.Process.Pid)
	if !ok {
		b.Fatalf("reading /proc/%d/stat of rudder", p.cmd.Process.Pid)
	}
	return st.cpu + st.children + p.workersCPU(b)
}

// cpu is the process's user and system CPU time so far.
func (p *rudderProcess) cpu(b *testing.B) time.Duration {
	st, ok := readProcStat(p.cmd.Process.Pid)
	if !ok {
		b.Fatalf("reading /proc/%d/stat of rudder", p.cmd.Process.Pid)
	}
	return st.cpu
}

// resident is a process's resident set, in bytes: the whole (VmRSS), its anonymous pages
// (heap, stacks, the runtime's own) and the pages of files it maps (its binary), and the
// largest it has been (VmHWM). How many of the
// binary's pages are resident depends on the page cache more than on rudder: the kernel maps
// the cached neighbours of every page a fault touches, so a binary just written by go build is
// mapped in larger runs (about 56 MiB of rudder's 71 MB binary on this VM) than one read back
// from disk after the cache was dropped (about 39 MiB), with the same ~13 MiB anonymous.
type resident struct{ total, anon, file, peak float64 }

func (p *rudderProcess) resident(b *testing.B) resident {
	r, ok := residentOf(b, p.cmd.Process.Pid)
	if !ok {
		b.Fatalf("/proc/%d/status of rudder: gone, or without VmRSS, RssAnon and RssFile", p.cmd.Process.Pid)
	}
	return r
}

// residentOf is process pid's resident set; false when the process is gone (or a zombie,
// whose status has no resident set).
func residentOf(b *testing.B, pid int) (resident, bool) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if errors.Is(err, fs.ErrNotExist) {
		return resident{}, false
	}
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	var r resident
	fields := map[string]*float64{"VmRSS:": &r.total, "RssAnon:": &r.anon, "RssFile:": &r.file, "VmHWM:": &r.peak}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		name, v, ok := strings.Cut(sc.Text(), "\t")
		if dst := fields[name]; ok && dst != nil {
			*dst = kiloBytes(b, v)
			delete(fields, name)
		}
	}
	return r, len(fields) == 0
}

// kiloBytes is a /proc size ("  1234 kB") in bytes.
func kiloBytes(b *testing.B, v string) float64 {
	kb, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 64)
	if err != nil {
		b.Fatal(err)
	}
	return kb * 1024
}

func (p *rudderProcess) scrape() (string, error) {
	resp, err := http.Get(p.metrics)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return string(body), err
}

// metric sums the samples of one metric name on rudder's /metrics.
func (p *rudderProcess) metric(b *testing.B, name string) float64 {
	body, err := p.scrape()
	if err != nil {
		b.Fatal(err)
	}
	return crtest.SeriesSum(body, name, nil)
}

// writeScalePlot draws the two curves of a run as an SVG line chart.
func writeScalePlot(path string, r *scaleRun) error {
	const w, h, left, bottom, top, right = 720, 420, 60, 50, 40, 20
	maxT := r.converge
	if r.direct > maxT {
		maxT = r.direct
	}
	x := func(t time.Duration) float64 { return left + float64(t)/float64(maxT)*(w-left-right) }
	y := func(n int) float64 { return h - bottom - float64(n)/float64(r.n)*(h-bottom-top) }
	line := func(pts []point) string {
		var sb strings.Builder
		fmt.Fprintf(&sb, "%.1f,%.1f", x(0), y(0))
		for _, p := range pts {
			fmt.Fprintf(&sb, " %.1f,%.1f", x(p.t), y(p.n))
		}
		return sb.String()
	}
	var sb strings.Builder
	fmt.Fprintf(&sb, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" font-size="12">`+"\n", w, h)
	fmt.Fprintf(&sb, `<rect width="%d" height="%d" fill="white"/>`+"\n", w, h)
	fmt.Fprintf(&sb, `<text x="%d" y="22" font-size="14">%d releases deployed over time: rudder %.1f CR/s, direct store of the same objects %.1f CR/s</text>`+"\n",
		left, r.n, r.rate, float64(r.n)/r.direct.Seconds())
	fmt.Fprintf(&sb, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="black"/>`+"\n", left, h-bottom, w-right, h-bottom)
	fmt.Fprintf(&sb, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="black"/>`+"\n", left, top, left, h-bottom)
	for i := 0; i <= 4; i++ {
		t := maxT * time.Duration(i) / 4
		fmt.Fprintf(&sb, `<text x="%.1f" y="%d" text-anchor="middle">%.0f s</text>`+"\n", x(t), h-bottom+18, t.Seconds())
		c := r.n * i / 4
		fmt.Fprintf(&sb, `<text x="%d" y="%.1f" text-anchor="end">%d</text>`+"\n", left-6, y(c)+4, c)
	}
	fmt.Fprintf(&sb, `<polyline fill="none" stroke="#1f77b4" stroke-width="2" points="%s"/>`+"\n", line(r.rudder))
	fmt.Fprintf(&sb, `<polyline fill="none" stroke="#ff7f0e" stroke-width="2" stroke-dasharray="6,4" points="%s"/>`+"\n", line(r.store))
	fmt.Fprintf(&sb, `<text x="%d" y="%d" fill="#1f77b4">rudder (releases deployed)</text>`+"\n", left+20, top+20)
	fmt.Fprintf(&sb, `<text x="%d" y="%d" fill="#ff7f0e">direct store (Deployment and Service created)</text>`+"\n", left+20, top+38)
	sb.WriteString("</svg>\n")
	return os.WriteFile(path, []byte(sb.String()), 0o644)
}
