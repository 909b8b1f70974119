package wiring

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/metrics/filters"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/rudder-operator/rudder/controllers"
	"github.com/rudder-operator/rudder/internal/chartsource"
	"github.com/rudder-operator/rudder/internal/machine"
	"github.com/rudder-operator/rudder/internal/records"
	"github.com/rudder-operator/rudder/internal/watches"
)

// GracefulShutdown is how long a stopping manager waits for its runnables (a pass in flight is
// cancelled, as a CR deletion cancels it) before it returns: inside the kubelet's 30 s grace
// period, with time left for the process to exit.
const GracefulShutdown = 20 * time.Second

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
		if w.Policies().WatchesDependents() {
			dep = dependents
		}
		rs[i], err = controllers.New(controllers.Options{
			Watch: w, Charts: charts, Helm: machine.ReleasesOf(hc), Hooks: opts.Hooks, Sources: sources,
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
	controllers.Join(mgr.GetClient(), rs)
	if err := serveWatches(cfg, mgr, opts, shard, served{mapper, caches, late}, ws, rs); err != nil {
		return nil, nil, err
	}
	return mgr, charts, nil
}

// serveWatches sets the controller of each watch of ws (its reconciler in rs) up: now, or
// once the API server serves its kind; and the rollout coordinators once it serves the
// Rollout kind.
func serveWatches(cfg *rest.Config, mgr manager.Manager, opts ManagerOptions, shard labels.Selector, k served, ws []*watches.Watch,
	rs []*controllers.Reconciler) error {
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
			ctrl.Log.WithName("setup").Error(err,
				"the watch's chart does not load; its kind is unserved until it does (its CRs are Stalled, reason ChartInvalid)", "watch", w.String())
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
