package wiring

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	rolloutv1 "github.com/rudder-operator/rudder/api/rollout/v1alpha1"
	"github.com/rudder-operator/rudder/controllers"
	"github.com/rudder-operator/rudder/internal/helm"
	"github.com/rudder-operator/rudder/internal/machine"
	"github.com/rudder-operator/rudder/internal/watches"
)

// waitingForCRD is 1 for each watched kind whose CRD the API server does not serve yet.
var waitingForCRD = prometheus.NewGaugeVec(prometheus.GaugeOpts{
	Name: "rudder_watch_waiting_for_crd",
	Help: "1 while the API server does not serve a watched kind (its CRD is not established yet); its CRs are served once it does.",
}, []string{"gvk"})

func init() { metrics.Registry.MustRegister(waitingForCRD) }

// crdPollInterval is how often rudder asks discovery whether a watched kind is served yet.
const crdPollInterval = 2 * time.Second

// kindCaches is the manager's cache with the watched kinds that were not served at start kept
// out of it: controller-runtime's cache needs every configured kind's mapping when it is made.
// Each such kind gets a cache of its own, narrowed as the manager's narrows the others, once the
// API server serves it; until then reads of it fail as for an unknown kind.
type kindCaches struct {
	cache.Cache
	scheme *runtime.Scheme
	mu     sync.RWMutex
	late   map[schema.GroupVersionKind]cache.Cache // nil until served
	// anyLate: late has a kind (its keys are fixed when it is made).
	anyLate bool
	ctx     context.Context
}

func newKindCaches(c cache.Cache, scheme *runtime.Scheme, late []schema.GroupVersionKind) *kindCaches {
	k := &kindCaches{Cache: c, scheme: scheme, late: map[schema.GroupVersionKind]cache.Cache{}, anyLate: len(late) > 0}
	for _, gvk := range late {
		k.late[gvk] = nil
	}
	return k
}

// route is the cache that holds objects of obj's kind (a list's items' kind).
func (k *kindCaches) route(obj runtime.Object) (cache.Cache, error) {
	if !k.anyLate {
		return k.Cache, nil
	}
	gvk, err := apiutil.GVKForObject(obj, k.scheme)
	if err != nil {
		return k.Cache, nil //nolint:nilerr // the manager's cache says why
	}
	gvk.Kind = strings.TrimSuffix(gvk.Kind, "List")
	k.mu.RLock()
	c, late := k.late[gvk]
	k.mu.RUnlock()
	switch {
	case !late:
		return k.Cache, nil
	case c == nil:
		return nil, &meta.NoKindMatchError{GroupKind: gvk.GroupKind(), SearchedVersions: []string{gvk.Version}}
	}
	return c, nil
}

func (k *kindCaches) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	c, err := k.route(obj)
	if err != nil {
		return err
	}
	return c.Get(ctx, key, obj, opts...)
}

func (k *kindCaches) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	c, err := k.route(list)
	if err != nil {
		return err
	}
	return c.List(ctx, list, opts...)
}

func (k *kindCaches) GetInformer(ctx context.Context, obj client.Object, opts ...cache.InformerGetOption) (cache.Informer, error) {
	c, err := k.route(obj)
	if err != nil {
		return nil, err
	}
	return c.GetInformer(ctx, obj, opts...)
}

func (k *kindCaches) IndexField(ctx context.Context, obj client.Object, field string, extract client.IndexerFunc) error {
	c, err := k.route(obj)
	if err != nil {
		return err
	}
	return c.IndexField(ctx, obj, field, extract)
}

func (k *kindCaches) Start(ctx context.Context) error {
	k.mu.Lock()
	k.ctx = ctx
	k.mu.Unlock()
	return k.Cache.Start(ctx)
}

// serve makes the cache of a late kind, routes the kind's reads to it, runs setup (which
// indexes the kind and starts its controller on the running manager), then starts the cache
// and waits for its first list. The cache is routed to before it starts, so that setup's index
// is added to an informer that has not started.
func (k *kindCaches) serve(ctx context.Context, gvk schema.GroupVersionKind, newCache func() (cache.Cache, error),
	setup func() error) error {
	k.mu.RLock()
	started := k.ctx
	k.mu.RUnlock()
	if started == nil {
		return fmt.Errorf("the manager's cache has not started")
	}
	c, err := newCache()
	if err != nil {
		return err
	}
	k.mu.Lock()
	k.late[gvk] = c
	k.mu.Unlock()
	if err := setup(); err != nil {
		return err
	}
	go func() { _ = c.Start(started) }()
	if !c.WaitForCacheSync(ctx) {
		return fmt.Errorf("the cache of %s did not sync", gvk)
	}
	return nil
}

// lateWatch serves a watched kind once the API server does: it waits (saying so in a log line
// and rudder_watch_waiting_for_crd), then makes the kind's cache and sets its controller up on
// the running manager. The other kinds are served meanwhile.
type lateWatch struct {
	gvk      schema.GroupVersionKind
	mapper   meta.RESTMapper
	caches   *kindCaches
	newCache func() (cache.Cache, error)
	setup    func() error
	log      logr.Logger
	// reader lists the kind uncached, in the first of namespaces (none: cluster-wide), to
	// know that the API server serves it: discovery may name a new CRD's resource before its
	// handler answers, and an informer whose first lists fail backs off for up to 30 s.
	reader     client.Reader
	namespaces []string
}

// served reports whether the API server answers a list of the kind.
func (l *lateWatch) served(ctx context.Context) bool {
	if _, err := l.mapper.RESTMapping(l.gvk.GroupKind(), l.gvk.Version); err != nil {
		return false
	}
	if l.reader == nil {
		return true
	}
	list := &metav1.PartialObjectMetadataList{}
	list.SetGroupVersionKind(l.gvk.GroupVersion().WithKind(l.gvk.Kind + "List"))
	opts := []client.ListOption{client.Limit(1)}
	if len(l.namespaces) > 0 {
		opts = append(opts, client.InNamespace(l.namespaces[0]))
	}
	return l.reader.List(ctx, list, opts...) == nil
}

func (l *lateWatch) Start(ctx context.Context) error {
	label := l.gvk.Kind + "." + l.gvk.Group + "/" + l.gvk.Version
	waitingForCRD.WithLabelValues(label).Set(1)
	l.log.Info("waiting for the API server to serve a watched kind (its CRD is not established yet); serving the other kinds meanwhile",
		"gvk", label)
	err := wait.PollUntilContextCancel(ctx, crdPollInterval, true, func(ctx context.Context) (bool, error) {
		return l.served(ctx), nil
	})
	if err != nil {
		return nil // stopped while waiting
	}
	if err := l.caches.serve(ctx, l.gvk, l.newCache, l.setup); err != nil {
		return fmt.Errorf("serving %s: %w", label, err)
	}
	waitingForCRD.WithLabelValues(label).Set(0)
	l.log.Info("the API server serves the watched kind; its CRs are served now", "gvk", label)
	return nil
}

// serveWatch sets a watch's controller up now, or, for a kind not served yet (lw set), once
// it is.
func serveWatch(mgr manager.Manager, r *controllers.Reconciler, lw *lateWatch) error {
	if lw == nil {
		return r.SetupWithManager(mgr)
	}
	lw.setup = func() error { return r.SetupWithManager(mgr) }
	return mgr.Add(lw)
}

// watchedMapper is the mapper of the manager, and the kinds it does not map yet among the
// watched kinds and, when a watch has a rollout policy, rudder's own Rollout.
func watchedMapper(cfg *rest.Config, ws []*watches.Watch) (meta.RESTMapper, map[schema.GroupVersionKind]bool, error) {
	mapper, err := newMapper(cfg)
	if err != nil {
		return nil, nil, err
	}
	gvks := make([]schema.GroupVersionKind, len(ws))
	for i, w := range ws {
		gvks[i] = w.GroupVersionKind()
	}
	if rolloutWatches(ws) {
		gvks = append(gvks, rolloutGVK)
	}
	return mapper, lateKinds(mapper, gvks, ctrl.Log.WithName("watches")), nil
}

// rolloutGVK is rudder's own Rollout kind, which the coordinators of watches with a rollout
// policy keep their state in.
var rolloutGVK = rolloutv1.GroupVersion.WithKind("Rollout")

// rolloutWatches reports whether a watch of ws has a rollout policy.
func rolloutWatches(ws []*watches.Watch) bool {
	return slices.ContainsFunc(ws, func(w *watches.Watch) bool { return w.Rollout != nil })
}

// lateRollouts starts the rollout coordinators of rs once the API server serves the Rollout
// kind (its CRD, config/crd, is applied), as a late watched kind is served: every kind is
// served meanwhile, and the passes of rs's CRs keep each on its release's chart, saying why.
func lateRollouts(cfg *rest.Config, mgr manager.Manager, mapper meta.RESTMapper, caches *kindCaches,
	rs []*controllers.Reconciler) *lateWatch {
	return &lateWatch{gvk: rolloutGVK, mapper: mapper, caches: caches, log: ctrl.Log.WithName("watches"), reader: mgr.GetAPIReader(),
		newCache: func() (cache.Cache, error) {
			return cache.New(cfg, cache.Options{HTTPClient: mgr.GetHTTPClient(), Scheme: mgr.GetScheme(), Mapper: mgr.GetRESTMapper()})
		},
		setup: func() error {
			for _, r := range rs {
				if err := r.SetupRollouts(mgr); err != nil {
					return err
				}
			}
			return nil
		}}
}

// lateKinds are the watched kinds the API server does not serve yet (or whose mapping it
// cannot tell now: they are asked again until it can).
func lateKinds(mapper meta.RESTMapper, gvks []schema.GroupVersionKind, log logr.Logger) map[schema.GroupVersionKind]bool {
	late := map[schema.GroupVersionKind]bool{}
	for _, gvk := range gvks {
		if _, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version); err != nil {
			late[gvk] = true
			if !meta.IsNoMatchError(err) {
				log.Info("a watched kind's mapping is not known now; it is asked again", "gvk", gvk.String(), "error", err.Error())
			}
		}
	}
	return late
}

var _ manager.Runnable = (*lateWatch)(nil)

// newMapper is controller-runtime's dynamic mapper with its answers kept (helm.MemoMapper),
// for the manager, its caches and clients, and Helm; made before the manager, which is told
// which watched kinds it serves.
func newMapper(cfg *rest.Config) (meta.RESTMapper, error) {
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, err
	}
	m, err := apiutil.NewDynamicRESTMapper(cfg, hc)
	if err != nil {
		return nil, err
	}
	return helm.MemoMapper(m), nil
}

// crCaches adds to byObject how the manager's cache keeps each watch's CRs: only those of
// its selector and of this shard. It returns the kinds not served yet (late), the Rollout
// kind among them, which get a cache of their own once they are (see kindCaches).
func crCaches(byObject map[client.Object]cache.ByObject, ws []*watches.Watch, shard labels.Selector,
	late map[schema.GroupVersionKind]bool) []schema.GroupVersionKind {
	var lateList []schema.GroupVersionKind
	if late[rolloutGVK] {
		lateList = append(lateList, rolloutGVK)
	}
	for _, w := range ws {
		if late[w.GroupVersionKind()] {
			lateList = append(lateList, w.GroupVersionKind())
			continue
		}
		byObject[controllers.CRObject(w.GroupVersionKind())] = crCache(w, shard)
	}
	return lateList
}

// crCache is how the cache keeps a watch's CRs: those of its selector and of this shard.
func crCache(w *watches.Watch, shard labels.Selector) cache.ByObject {
	return cache.ByObject{Label: narrowed(w.LabelSelector(), shard), Transform: stripCR}
}

// lateCache makes the cache of a watch's CRs whose kind was not served at start, configured as
// the manager's cache would have kept them.
func lateCache(cfg *rest.Config, mgr manager.Manager, opts ManagerOptions, w *watches.Watch, shard labels.Selector) func() (cache.Cache,
	error) {
	return func() (cache.Cache, error) {
		return cache.New(cfg, cache.Options{
			HTTPClient: mgr.GetHTTPClient(), Scheme: mgr.GetScheme(), Mapper: mgr.GetRESTMapper(),
			DefaultNamespaces: opts.cacheNamespaces(), DefaultTransform: machine.Compact,
			ByObject: map[client.Object]cache.ByObject{controllers.CRObject(w.GroupVersionKind()): crCache(w, shard)},
		})
	}
}

// served is what tells the kinds the API server serves from those it does not yet.
type served struct {
	mapper meta.RESTMapper
	caches *kindCaches
	late   map[schema.GroupVersionKind]bool
}
