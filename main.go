// Command rudder is a hybrid Helm operator: every kind listed in watches.yaml gets one Helm
// release per CR, rendered from a chart mounted from a volume and reloaded live.
package main

import (
	"context"
	goflag "flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime/debug"
	"runtime/metrics"
	"strings"
	"time"

	"github.com/go-logr/logr"
	"github.com/spf13/pflag"
	uzap "go.uber.org/zap"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/rudder-operator/rudder/internal/cli"
	"github.com/rudder-operator/rudder/internal/render"
	"github.com/rudder-operator/rudder/internal/wiring"
)

// stopBound is the longest rudder takes to exit once told to stop (SIGTERM, SIGINT), in every
// state of the manager: its graceful shutdown, and a few seconds to exit. A manager that has
// not returned by then (controller-runtime's start can wait on a runnable that never says it
// is ready, spinning, once its context is cancelled) is not waited for: the process exits.
const stopBound = wiring.GracefulShutdown + 5*time.Second

// boundStop exits the process stopBound after it was told to stop, unless it has exited.
func boundStop(log logr.Logger) {
	time.AfterFunc(stopBound, func() {
		log.Info("rudder did not stop within its bound; exiting", "bound", stopBound.String())
		os.Exit(1)
	})
}

// renderBudget is --render-memory-budget, else what the container's memory limit (0: none)
// leaves beside reserve (0, none, without a limit).
func renderBudget(budget, reserve, limit int64) int64 {
	if budget > 0 {
		return budget
	}
	if limit > 0 {
		return render.Budget(limit, reserve)
	}
	return 0
}

// defaultGCPercent is rudder's GOGC unless its environment sets one. Most of rudder's heap is
// its caches, which live as long as their CRs; at Go's default of 100 the runtime lets the heap
// grow to twice what was live at the last collection before it collects again, so that each CR
// costs rudder's resident memory twice what its caches hold. At 50 it costs one and a half, for
// collections twice as frequent: rudder's CPU per install and per idle pass, and the cost of
// its heap, are in docs/bench-archive.md ("the heap goal, not the live heap").
const defaultGCPercent = 50

// memoryPolicy is the Go runtime's collection target (GOGC) and soft memory limit (GOMEMLIMIT)
// for rudder, each 0 when the environment sets it (the runtime has read it) or none applies:
// the target defaultGCPercent; the limit rudder's own share of its container's memory limit,
// what the render budget (budget, held by the render workers, which are processes of the same
// container) leaves of it. Near its share the collector works harder instead of letting rudder
// take memory the workers were promised, so that the container reaches its limit, and the
// kernel's OOM killer stops rudder and every render with it, only when what is live does not
// fit.
func memoryPolicy(getenv func(string) string, limit, budget int64) (gcPercent int, memLimit int64) {
	if getenv("GOGC") == "" {
		gcPercent = defaultGCPercent
	}
	if getenv("GOMEMLIMIT") == "" && limit > 0 && budget < limit {
		memLimit = limit - budget
	}
	return gcPercent, memLimit
}

// setMemory shares the container's memory limit, read once, between the renders and rudder
// itself: it returns the render budget (renderBudget), and sets memoryPolicy's values in the
// runtime. It says what they are.
func setMemory(log logr.Logger, budgetFlag, reserve int64) (budget int64) {
	limit, _ := render.MemoryLimit()
	budget = renderBudget(budgetFlag, reserve, limit)
	gcPercent, memLimit := memoryPolicy(os.Getenv, limit, budget)
	if gcPercent > 0 {
		debug.SetGCPercent(gcPercent)
	}
	if memLimit > 0 {
		debug.SetMemoryLimit(memLimit)
	}
	now := []metrics.Sample{{Name: "/gc/gogc:percent"}, {Name: "/gc/gomemlimit:bytes"}}
	metrics.Read(now)
	log.Info("memory", "gogc", now[0].Value.Uint64(), "memoryLimit", now[1].Value.Uint64(),
		"containerLimit", limit, "renderBudget", budget, "renderReserve", reserve)
	return budget
}

// defaultRenderReserve is what rudder itself needs of its container's memory by default:
// about 6,000 CRs' caches and release records at GOGC=50 (docs/bench-archive.md, "the heap
// goal, not the live heap").
const defaultRenderReserve = 256 << 20

// quantityFlag is a flag of bytes written as a Kubernetes quantity ("512Mi").
type quantityFlag struct{ bytes int64 }

func (q *quantityFlag) String() string {
	if q == nil || q.bytes == 0 {
		return ""
	}
	return resource.NewQuantity(q.bytes, resource.BinarySI).String()
}

func (q *quantityFlag) Set(s string) error {
	v, err := resource.ParseQuantity(s)
	if err != nil {
		return err
	}
	if v.Sign() < 0 {
		return fmt.Errorf("%s is negative", s)
	}
	q.bytes = v.Value()
	return nil
}

// quantityFlag is a pflag.Value.
func (q *quantityFlag) Type() string { return "quantity" }

func main() {
	plugin := strings.HasPrefix(filepath.Base(os.Args[0]), "kubectl-")
	os.Exit(cli.Execute(context.Background(), os.Args[1:], cli.Env{
		Stdout: os.Stdout, Stderr: os.Stderr, Hooks: wiring.BuiltinHooks(clock.RealClock{}), Plugin: plugin,
	}, manager()))
}

// manager is the operator's command line: `rudder` and `rudder run`, with kubebuilder's and
// operator-sdk's flag names, controller-runtime's --kubeconfig and its zap logging flags.
func manager() *cli.Manager {
	var (
		opts        wiring.ManagerOptions
		namespaces  string
		compression bool
		budget      quantityFlag
		reserve     = quantityFlag{bytes: defaultRenderReserve}
	)
	flag := pflag.NewFlagSet("manager", pflag.ContinueOnError)
	flag.StringVar(&opts.WatchesFile, "watches-file", "./watches.yaml", "Path to watches.yaml (GVK → chart directory).")
	flag.StringVar(&namespaces, "watch-namespace", os.Getenv("WATCH_NAMESPACE"), "Comma-separated namespaces to watch; empty watches all.")
	flag.StringVar(&opts.MetricsBindAddress, "metrics-bind-address", ":8443",
		`Address of the metrics endpoint: :8443 for HTTPS, :8080 for HTTP (with --metrics-secure=false); "0" disables it.`)
	flag.BoolVar(&opts.MetricsSecure, "metrics-secure", true,
		"Serve metrics over HTTPS, only to clients that authenticate and may get /metrics (ClusterRole rudder-metrics-reader).")
	flag.StringVar(&opts.DefaultServiceAccount, "default-service-account", "",
		"ServiceAccount, in each CR's namespace, that release requests impersonate unless the watch sets serviceAccountName; empty: rudder's "+
			"own identity.")
	flag.StringVar(&opts.HealthProbeBindAddress, "health-probe-bind-address", ":8081", `Address of /healthz and /readyz; "0" disables them.`)
	flag.BoolVar(&compression, "kube-api-compression", false,
		"Ask the API server for gzip-compressed responses and watch streams: less traffic, more CPU on both ends; worth it only when rudder "+
			"runs far from its API server.")
	flag.StringVar(&opts.PprofBindAddress, "pprof-bind-address", "0", `Address of net/http/pprof (e.g. 127.0.0.1:6060); "0" disables it.`)
	flag.BoolVar(&opts.LeaderElection, "leader-elect", false, "Elect a leader among replicas, so that only one reconciles.")
	flag.StringVar(&opts.LeaderElectionID, "leader-election-id", "",
		"Name of the leader election Lease (default: rudder.rudder.dev, or one derived from --watch-label-selector).")
	flag.StringVar(&opts.WatchLabelSelector, "watch-label-selector", "",
		"Shard: serve only the CRs, of every watched kind, whose labels match this selector (e.g. rudder.dev/shard=a); empty serves all.")
	flag.StringVar(&opts.LeaderElectionNS, "leader-election-namespace", "", "Namespace of the Lease (default: the one rudder runs in).")
	flag.IntVar(&opts.MaxConcurrentReconciles, "max-concurrent-reconciles", 4,
		"Workers per kind, unless its watch sets maxConcurrentReconciles.")
	flag.DurationVar(&opts.ReconcilePeriod, "reconcile-period", time.Minute,
		"How often every CR is re-checked (jittered, in steps of a twelfth of it), unless its watch sets reconcilePeriod; 0 disables.")
	flag.BoolVar(&opts.ChartReload, "chart-reload", true, "Watch chart directories with fsnotify and roll changes out live.")
	flag.DurationVar(&opts.ChartDebounce, "chart-debounce", time.Second, "Quiet time after the last chart file event before a reload.")
	flag.DurationVar(&opts.ChartRescan, "chart-rescan", time.Minute,
		"Period of a full chart rescan for filesystems without events; 0 disables.")
	flag.Var(&budget, "render-memory-budget",
		"Memory the renders running at once may hold together (e.g. 1Gi); a render whose renderMemory does not fit waits its turn. Default: the "+
			"container's memory limit less --render-memory-reserve; no budget without a limit.")
	flag.Var(&reserve, "render-memory-reserve",
		"Memory of the container's limit left to rudder itself when the render budget is derived from it (about 64Mi plus 32Ki per CR); "+
			"rudder's share of the limit is its Go runtime's soft memory limit.")
	// controller-runtime's own flags: --kubeconfig (registered on the standard library's
	// command line by its config package) and the zap logger's.
	zapOpts := zap.Options{ZapOpts: []uzap.Option{uzap.WrapCore(cli.LazyFields)}}
	logFlags := goflag.NewFlagSet("zap", goflag.ContinueOnError)
	zapOpts.BindFlags(logFlags)
	flag.AddGoFlagSet(logFlags)
	flag.AddGoFlag(goflag.CommandLine.Lookup("kubeconfig"))

	return &cli.Manager{Flags: flag, Run: func(context.Context) error {
		ctrl.SetLogger(zap.New(zap.UseFlagOptions(&zapOpts)))
		for _, ns := range strings.Split(namespaces, ",") {
			if ns = strings.TrimSpace(ns); ns != "" {
				opts.WatchNamespaces = append(opts.WatchNamespaces, ns)
			}
		}
		runManager(opts, compression, budget.bytes, reserve.bytes)
		return nil
	}}
}

// runManager runs the operator with opts until it is told to stop; it exits the process on
// failure.
func runManager(opts wiring.ManagerOptions, compression bool, budget, reserve int64) {
	log := ctrl.Log.WithName("setup")
	opts.RenderMemoryBudget = setMemory(log, budget, reserve)
	cfg, err := ctrl.GetConfig()
	if err != nil {
		log.Error(err, "loading kubeconfig")
		os.Exit(1)
	}
	cfg.DisableCompression = !compression
	mgr, _, err := wiring.NewManager(cfg, opts)
	if err != nil {
		log.Error(err, "setting up rudder")
		os.Exit(1)
	}
	log.Info("starting rudder", "watches", opts.WatchesFile, "namespaces", opts.WatchNamespaces)
	ctx := ctrl.SetupSignalHandler()
	context.AfterFunc(ctx, func() { boundStop(log) })
	if err := mgr.Start(ctx); err != nil {
		log.Error(err, "rudder stopped")
		os.Exit(1)
	}
}
