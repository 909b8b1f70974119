package wiring

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"slices"
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/selection"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/metrics/filters"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	appv1 "github.com/rudder-operator/rudder/api/apps/v1"
	cnatv1alpha1 "github.com/rudder-operator/rudder/api/cnat/v1alpha1"
	operatorv1alpha1 "github.com/rudder-operator/rudder/api/operator/v1alpha1"
	rolloutv1 "github.com/rudder-operator/rudder/api/rollout/v1alpha1"
	"github.com/rudder-operator/rudder/controllers"
	"github.com/rudder-operator/rudder/controllers/application"
	"github.com/rudder-operator/rudder/controllers/at"
	"github.com/rudder-operator/rudder/internal/chartsource"
	"github.com/rudder-operator/rudder/internal/hook"
	"github.com/rudder-operator/rudder/internal/machine"
	"github.com/rudder-operator/rudder/internal/records"
	"github.com/rudder-operator/rudder/internal/watches"
)

// GracefulShutdown is how long a stopping manager waits for its runnables (a pass in flight is
// cancelled, as a CR deletion cancels it) before it returns: inside the kubelet's 30 s grace
// period, with time left for the process to exit.
const GracefulShutdown = 20 * time.Second

// ManagerOptions configure rudder. The zero value of each field is a sensible default, except
// WatchesFile.
type ManagerOptions struct {
	WatchesFile string
	// Watches, when set, are used instead of reading WatchesFile.
	Watches []*watches.Watch
	// WatchNamespaces limits every cache to these namespaces (empty: all).
	WatchNamespaces []string
	// WatchLabelSelector shards rudder (Flux's flag name): this replica serves only the CRs,
	// of every watched kind, whose labels the selector matches (on top of each watch's own
	// selector), and its caches hold only those CRs, their release records and their
	// operands. "" serves every CR.
	WatchLabelSelector string

	MetricsBindAddress string // "0" disables
	// MetricsSecure serves metrics over HTTPS to clients that authenticate (TokenReview) and
	// may get /metrics (SubjectAccessReview), as kubebuilder scaffolds it.
	MetricsSecure          bool
	HealthProbeBindAddress string // "0" disables
	// PprofBindAddress serves net/http/pprof there ("" or "0": off, the default).
	PprofBindAddress string
	LeaderElection   bool
	// LeaderElectionID names the Lease; "" derives it from WatchLabelSelector, so that each
	// shard elects its own leader.
	LeaderElectionID string
	LeaderElectionNS string

	MaxConcurrentReconciles int
	ReconcilePeriod         time.Duration
	// RenderMemoryBudget bounds the sum of the memory bounds of the renders running at once
	// (render.Options.MemoryBudget; 0: none but each render's own).
	RenderMemoryBudget int64

	// DefaultServiceAccount is impersonated, in each CR's namespace, for the releases of
	// watches that name no serviceAccountName ("" = rudder's own identity).
	DefaultServiceAccount string

	ChartReload   bool
	ChartDebounce time.Duration
	ChartRescan   time.Duration

	// Clock for the hooks and reconcilers (tests inject a fake one).
	Clock clock.PassiveClock
	// OnPass is each Reconciler's (see Options.OnPass).
	OnPass func(gvk schema.GroupVersionKind, cr *unstructured.Unstructured)
	// SeveralManagers allows more than one rudder manager in a process (tests): controller
	// names, which name their metrics, are then not checked for uniqueness.
	SeveralManagers bool
	// Hooks replaces the built-in hook registry (nil: the built-in kinds' hooks).
	Hooks *hook.Registry
}

// Scheme knows the built-in kinds and client-go's types.
func Scheme() *runtime.Scheme {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{
		clientgoscheme.AddToScheme, rolloutv1.AddToScheme, operatorv1alpha1.AddToScheme, cnatv1alpha1.AddToScheme, appv1.AddToScheme,
	} {
		if err := add(s); err != nil {
			panic(err) // static registration; cannot fail at run time
		}
	}
	return s
}

// BuiltinHooks are the Go hooks of the built-in kinds (At, Application).
func BuiltinHooks(c clock.PassiveClock) *hook.Registry {
	r := hook.NewRegistry()
	at.Register(r, c)
	application.Register(r)
	return r
}

// NewManager builds a manager running one reconciler per watch. Start it with mgr.Start(ctx).
func NewManager(cfg *rest.Config, opts ManagerOptions) (manager.Manager, *chartsource.Source, error) {
	ws, shard, err := opts.watchesAndShard()
	if err != nil {
		return nil, nil, err
	}
	opts.defaults(shard)
	mapper, late, err := watchedMapper(cfg, ws)
	if err != nil {
		return nil, nil, err
	}
	mgr, caches, err := newManager(cfg, opts, ws, shard, mapper, late)
	if err != nil {
		return nil, nil, err
	}
	dependents, err := dependentsCache(cfg, mgr, opts, ws, shard)
	if err != nil {
		return nil, nil, err
	}
	charts, err := chartSource(mgr, opts, ws)
	if err != nil {
		return nil, nil, err
	}
	carried := selectorKeys(shard)
	hc, err := helmClient(cfg, mgr, opts, shard)
	if err != nil {
		return nil, nil, err
	}
	recorder, mgr, err := eventRecorder(cfg, mgr)
	if err != nil {
		return nil, nil, err
	}
	sources := NewSources(cfg, ctrl.Log.WithName("sources"))
	if err := mgr.Add(sources); err != nil {
		return nil, nil, err
	}
	rs := make([]*controllers.Reconciler, len(ws))
	for i, w := range ws {
		var dep cache.Cache
		if w.WatchesDependents() {
			dep = dependents
		}
		rs[i], err = controllers.New(controllers.Options{
			Watch: w, Charts: charts, Helm: hc, Hooks: opts.Hooks, Sources: sources,
			Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Dependents: dep,
			Recorder: recorder, Clock: opts.Clock, OnPass: opts.OnPass, DefaultServiceAccount: opts.DefaultServiceAccount,
			WatchAccess:     WatchAccess(mgr.GetClient(), mgr.GetRESTMapper(), opts.WatchNamespaces),
			ReconcilePeriod: opts.ReconcilePeriod, MaxConcurrentReconciles: opts.MaxConcurrentReconciles,
			Carried: carried, Shard: shard.String(), RolloutsLater: w.Rollout != nil && late[rolloutGVK],
		})
		if err != nil {
			return nil, nil, err
		}
	}
	if err := serveWatches(cfg, mgr, opts, shard, served{mapper, caches, late}, ws, rs); err != nil {
		return nil, nil, err
	}
	return mgr, charts, nil
}

// served is what tells the kinds the API server serves from those it does not yet.
type served struct {
	mapper meta.RESTMapper
	caches *kindCaches
	late   map[schema.GroupVersionKind]bool
}

// serveWatches sets the controller of each watch of ws (its reconciler in rs) up: now, or
// once the API server serves its kind; and the rollout coordinators once it serves the
// Rollout kind.
func serveWatches(cfg *rest.Config, mgr manager.Manager, opts ManagerOptions, shard labels.Selector, k served, ws []*watches.Watch, rs []*controllers.Reconciler) error {
	var rolloutsLater []*controllers.Reconciler
	for i, w := range ws {
		if w.Rollout != nil && k.late[rolloutGVK] {
			rolloutsLater = append(rolloutsLater, rs[i])
		}
		var lw *lateWatch
		if k.late[w.GroupVersionKind()] {
			lw = &lateWatch{gvk: w.GroupVersionKind(), mapper: k.mapper, caches: k.caches, log: ctrl.Log.WithName("watches"),
				reader: mgr.GetAPIReader(), namespaces: opts.WatchNamespaces, newCache: lateCache(cfg, mgr, opts, w, shard)}
		}
		if err := serveWatch(mgr, rs[i], lw); err != nil {
			return err
		}
	}
	if len(rolloutsLater) == 0 {
		return nil
	}
	return mgr.Add(lateRollouts(cfg, mgr, k.mapper, k.caches, rolloutsLater))
}

// watchesAndShard are the watches (given, or loaded from WatchesFile) and the shard selector.
func (o *ManagerOptions) watchesAndShard() ([]*watches.Watch, labels.Selector, error) {
	ws := o.Watches
	if ws == nil {
		var err error
		if ws, err = watches.Load(o.WatchesFile); err != nil {
			return nil, nil, err
		}
	}
	shard, err := labels.Parse(o.WatchLabelSelector)
	if err != nil {
		return nil, nil, fmt.Errorf("--watch-label-selector %q: %w", o.WatchLabelSelector, err)
	}
	return ws, shard, nil
}

func (o *ManagerOptions) defaults(shard labels.Selector) {
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	if o.Hooks == nil {
		o.Hooks = BuiltinHooks(o.Clock)
	}
	if o.MetricsBindAddress == "" {
		o.MetricsBindAddress = "0"
	}
	if o.HealthProbeBindAddress == "" {
		o.HealthProbeBindAddress = "0"
	}
	if o.LeaderElectionID == "" {
		o.LeaderElectionID = LeaderElectionID(shard)
	}
}

// LeaderElectionID is the Lease name of the shard that serves the CRs shard selects:
// rudder.rudder.dev when unsharded, else one derived from the selector, so that the replicas of
// one shard elect one leader and shards do not contend.
func LeaderElectionID(shard labels.Selector) string {
	if shard.Empty() {
		return "rudder.rudder.dev"
	}
	sum := sha256.Sum256([]byte(shard.String()))
	return "rudder-" + hex.EncodeToString(sum[:])[:10] + ".rudder.dev"
}

// selectorKeys are the label keys a selector names, sorted.
func selectorKeys(sel labels.Selector) []string {
	reqs, _ := sel.Requirements()
	keys := make([]string, 0, len(reqs))
	for _, r := range reqs {
		if !slices.Contains(keys, r.Key()) {
			keys = append(keys, r.Key())
		}
	}
	sort.Strings(keys)
	return keys
}

// narrowed is sel with the shard's requirements added.
func narrowed(sel, shard labels.Selector) labels.Selector {
	reqs, _ := shard.Requirements()
	return sel.Add(reqs...)
}

// cacheNamespaces is the caches' namespaces (nil: all).
func (o *ManagerOptions) cacheNamespaces() map[string]cache.Config {
	if len(o.WatchNamespaces) == 0 {
		return nil
	}
	namespaces := map[string]cache.Config{}
	for _, ns := range o.WatchNamespaces {
		namespaces[ns] = cache.Config{}
	}
	return namespaces
}

// newManager is the controller-runtime manager: its cache holds the watched CRs and the
// metadata of rudder's own release Secrets (memory grows neither with the cluster's Secrets
// nor with the size of releases; Helm's storage reads releases uncached when an action needs
// them).
func newManager(cfg *rest.Config, opts ManagerOptions, ws []*watches.Watch, shard labels.Selector,
	mapper meta.RESTMapper, late map[schema.GroupVersionKind]bool) (manager.Manager, *kindCaches, error) {
	ownedReleases, err := labels.NewRequirement(records.LabelOwnerUID, selection.Exists, nil)
	if err != nil {
		return nil, nil, err
	}
	byObject := map[client.Object]cache.ByObject{
		records.ReleaseSecret(): {Label: narrowed(labels.NewSelector().Add(*ownedReleases), shard)},
	}
	lateList := crCaches(byObject, ws, shard, late)
	var caches *kindCaches
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:         Scheme(),
		MapperProvider: func(*rest.Config, *http.Client) (meta.RESTMapper, error) { return mapper, nil },
		NewCache: func(cfg *rest.Config, o cache.Options) (cache.Cache, error) {
			c, err := cache.New(cfg, o)
			if err != nil {
				return nil, err
			}
			caches = newKindCaches(c, o.Scheme, lateList)
			return caches, nil
		},
		Cache: cache.Options{
			DefaultTransform:  machine.Compact,
			DefaultNamespaces: opts.cacheNamespaces(),
			ByObject:          byObject,
		},
		Client:                        client.Options{Cache: &client.CacheOptions{Unstructured: true}},
		Metrics:                       metricsOptions(opts),
		HealthProbeBindAddress:        opts.HealthProbeBindAddress,
		PprofBindAddress:              opts.PprofBindAddress,
		LeaderElection:                opts.LeaderElection,
		LeaderElectionID:              opts.LeaderElectionID,
		LeaderElectionNamespace:       opts.LeaderElectionNS,
		LeaderElectionReleaseOnCancel: true,
		GracefulShutdownTimeout:       new(GracefulShutdown),
		Controller:                    config.Controller{SkipNameValidation: new(opts.SeveralManagers)},
	})
	if err != nil {
		return nil, nil, fmt.Errorf("creating manager: %w", err)
	}
	if err := records.IndexReleaseSecrets(context.Background(), mgr.GetFieldIndexer()); err != nil {
		return nil, nil, fmt.Errorf("indexing release Secrets: %w", err)
	}
	if opts.HealthProbeBindAddress != "0" {
		if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
			return nil, nil, err
		}
		if err := mgr.AddReadyzCheck("readyz", healthz.Ping); err != nil {
			return nil, nil, err
		}
	}
	return mgr, caches, nil
}

// chartSource loads every watch's chart, and watches them when reloads are on.
func chartSource(mgr manager.Manager, opts ManagerOptions, ws []*watches.Watch) (*chartsource.Source, error) {
	charts := chartsource.New(chartsource.Options{
		Watch: opts.ChartReload, Debounce: opts.ChartDebounce, Rescan: opts.ChartRescan,
		Log: ctrl.Log.WithName("charts"),
	})
	for _, w := range ws {
		if err := charts.Add(w.ChartPath(), watches.CheckValuesOf(ws, w.ChartPath())); err != nil {
			// Not fatal: the other kinds are served, and this one as soon as its chart loads.
			ctrl.Log.WithName("setup").Error(err, "the watch's chart does not load; its kind is unserved until it does (its CRs are Stalled, reason ChartInvalid)", "watch", w.String())
		}
	}
	if opts.ChartReload || opts.ChartRescan > 0 {
		if err := mgr.Add(charts); err != nil {
			return nil, err
		}
	}
	return charts, nil
}

// metricsOptions serve /metrics; when secure, over HTTPS (a self-signed certificate unless one
// is mounted) and only to clients the API server authenticates and authorizes for the
// nonResourceURL /metrics (ClusterRole rudder-metrics-reader).
func metricsOptions(opts ManagerOptions) metricsserver.Options {
	o := metricsserver.Options{BindAddress: opts.MetricsBindAddress, SecureServing: opts.MetricsSecure}
	if opts.MetricsSecure {
		o.FilterProvider = filters.WithAuthenticationAndAuthorization
	}
	return o
}

// stripCR is what the CR cache keeps: machine.Compact, and not kubectl's
// last-applied-configuration annotation, a copy of the CR as last applied (its whole spec
// again). rudder writes CRs only with patches, which leave the annotation alone.
func stripCR(in any) (any, error) {
	if u, ok := in.(*unstructured.Unstructured); ok {
		if ann, ok, _ := unstructured.NestedFieldNoCopy(u.Object, "metadata", "annotations"); ok {
			if m, ok := ann.(map[string]any); ok {
				delete(m, corev1.LastAppliedConfigAnnotation)
			}
		}
	}
	return machine.Compact(in)
}
