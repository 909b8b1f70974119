package controllers

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/rudder-operator/rudder/internal/chartsource"
	"github.com/rudder-operator/rudder/internal/gate"
	"github.com/rudder-operator/rudder/internal/hook"
	"github.com/rudder-operator/rudder/internal/machine"
	"github.com/rudder-operator/rudder/internal/records"
	"github.com/rudder-operator/rudder/internal/watches"
)

// Finalizer makes a CR's deletion wait for its release to be uninstalled. The annotations
// people set on CRs are the state machine's (internal/machine: AnnotationPaused, …).
const Finalizer = "rudder.dev/uninstall-release"

// Options wire a Reconciler. Watch, Charts, Helm, Client and APIReader are required.
type Options struct {
	Watch  *watches.Watch
	Charts *chartsource.Source
	Helm   machine.Releases
	Hooks  *hook.Registry
	// Sources reads the watch's valuesFrom sources (required when the watch has any):
	// wiring.Sources, or a fake in unit tests.
	Sources machine.SourceReader

	// Client reads CRs and release Secrets from the manager's cache and writes.
	Client client.Client
	// APIReader reads uncached (conflict checks, deletion).
	APIReader client.Reader
	// Dependents is a cache of rudder's operands (objects labelled rudder.dev/managed); nil
	// when the watch turns watchDependentResources off.
	Dependents cache.Cache
	Recorder   events.EventRecorder
	// WatchAccess, when set, is asked before a dependent watch starts on a kind (see
	// wiring.WatchAccess): a kind rudder may not list and watch fails the pass instead of waiting.
	WatchAccess func(context.Context, schema.GroupVersionKind) error
	// Clock is injectable for tests (default: the real clock).
	Clock clock.PassiveClock
	// OnPass, when set, is called as each pass ends, with the CR the pass read (nil: it was
	// gone), which it must not keep or change. Tests count a CR's passes with it
	// (crtest.PassCounter).
	OnPass func(gvk schema.GroupVersionKind, cr *unstructured.Unstructured)

	// Carried are the label keys this replica's shard selector names (--watch-label-selector):
	// each CR's values for them are carried to its release records and operands, so that the
	// shard's caches select those too (nil: not sharded).
	Carried []string

	// Shard is this replica's shard selector (--watch-label-selector; "": not sharded): its
	// rollouts move only its CRs, under names of their own (see rollout.go).
	Shard string

	// RolloutsLater: the API server does not serve the Rollout kind yet, so SetupWithManager
	// leaves the watch's rollout coordinator out; the caller sets it up with SetupRollouts
	// once the kind is served. Meanwhile passes keep each CR on its release's chart, saying why.
	RolloutsLater bool

	// DefaultServiceAccount is impersonated for the releases of a watch that names no
	// serviceAccountName ("" = rudder's own identity); see helm.Scope.
	DefaultServiceAccount string

	// ReconcilePeriod and MaxConcurrentReconciles apply when the watch sets none.
	ReconcilePeriod         time.Duration
	MaxConcurrentReconciles int
}

// Reconciler reconciles the CRs of one watch: one Helm release per CR.
type Reconciler struct {
	opts Options
	gvk  schema.GroupVersionKind
	log  logr.Logger

	mu sync.Mutex
	// queue is the controller's work queue, known once the controller started; chart changes
	// enqueue every CR of the kind through it.
	queue workqueue.TypedRateLimitingInterface[reconcile.Request]
	// world is what the passes reach (internal/machine), memory what they remember of each
	// CR between them.
	world  *machine.World
	memory *machine.Memory
	// watching holds the operand kinds with a dependent watch, started or being started.
	watching map[schema.GroupVersionKind]*watchStart
	addWatch func(gvk schema.GroupVersionKind) error
	// statuses keep the status and finalizers passes wrote, for the passes that read a cache
	// behind them.
	statuses *statuses
	// behind holds, of the CRs whose pass found the API server ahead of the cache, the
	// version read: the cache's next version of the CR takes it again (see conflicted).
	behind map[types.NamespacedName]string
	// coord moves the watch's rollouts (nil: the watch has no rollout policy, or the Rollout
	// kind is not served yet). Set once, maybe after the controller started (SetupRollouts).
	coord atomic.Pointer[coordinator]
	// gate shares the workers out between namespaces (internal/gate).
	gate *gate.Gate
	// changedSources are the CRs whose values sources changed, queued once the chart's quiet
	// period is over (see SourceChanged).
	changedSources map[types.NamespacedName]bool
	sourcesTimer   *time.Timer
}

// New validates opts and returns a Reconciler; SetupWithManager starts it.
func New(opts Options) (*Reconciler, error) {
	switch {
	case opts.Watch == nil:
		return nil, errors.New("reconciler: Watch is required")
	case opts.Charts == nil:
		return nil, errors.New("reconciler: Charts is required")
	case opts.Helm == nil:
		return nil, errors.New("reconciler: Helm is required")
	case opts.Client == nil || opts.APIReader == nil:
		return nil, errors.New("reconciler: Client and APIReader are required")
	case len(opts.Watch.ValuesFrom) > 0 && opts.Sources == nil:
		return nil, errors.New("reconciler: Sources is required for a watch with valuesFrom")
	}
	if _, ok := opts.Charts.Get(opts.Watch.ChartPath()); !ok {
		return nil, fmt.Errorf("reconciler: chart %s of %s was not added to the chart source", opts.Watch.ChartPath(), opts.Watch)
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	if opts.Recorder == nil {
		opts.Recorder = &events.FakeRecorder{}
	}
	r := &Reconciler{
		opts:     opts,
		gvk:      opts.Watch.GroupVersionKind(),
		log:      ctrl.Log.WithName("reconciler").WithValues("kind", opts.Watch.String()),
		memory:   machine.NewMemory(opts.Watch),
		watching: map[schema.GroupVersionKind]*watchStart{},
		statuses: newStatuses(opts.Clock),
		behind:   map[types.NamespacedName]string{},

		changedSources: map[types.NamespacedName]bool{},
		gate:           gate.New(opts.Watch.String(), workers(opts), opts.Watch.ActionsPerNamespace(workers(opts))),
	}
	r.world = r.newWorld()
	return r, nil
}

// newWorld is what the passes of r's watch reach: its options, and r behind the doors.
func (r *Reconciler) newWorld() *machine.World {
	w := &machine.World{Watch: r.opts.Watch, Charts: r.opts.Charts, Hooks: r.opts.Hooks, Sources: r.opts.Sources, Queue: r,
		Carried: r.opts.Carried, Shard: r.opts.Shard, DefaultServiceAccount: r.opts.DefaultServiceAccount, Period: r.reconcilePeriod(),
		Helm: r.opts.Helm, Clock: r.opts.Clock, Live: r.opts.APIReader, Mapper: r.opts.Client.RESTMapper(), Scheme: r.opts.Client.Scheme(),
		Recorder: r.opts.Recorder, Memory: r.memory,
		Turns: r.gate, Watches: dependentWatches{r}, Status: statusWriter{r}, Rollouts: rolloutReader{r}}
	if r.opts.Dependents != nil {
		w.Operands = r.opts.Dependents
	}
	return w
}

// workers is how many passes of the watch's kind work at once.
func workers(opts Options) int {
	n := opts.Watch.MaxConcurrentReconciles
	if n <= 0 {
		n = opts.MaxConcurrentReconciles
	}
	return max(n, 1)
}

// Reconcile is thin: get → deletion → finalizer → pass → one status patch.
//
// If the returned error is non-nil the Result is ignored and the request is retried with
// back-off; a reconcile.TerminalError is not retried (the CR says why on Stalled).
func (r *Reconciler) Reconcile(ctx context.Context, req reconcile.Request) (result reconcile.Result, retErr error) {
	// ctx carries controller-runtime's logger, which names the controller, the CR and the
	// reconcileID; lines about the release add it.
	start := r.opts.Clock.Now()
	var seen *unstructured.Unstructured
	defer func() {
		observeReconcile(r.gvkLabel(), r.opts.Clock.Since(start), retErr)
		if r.opts.OnPass != nil {
			r.opts.OnPass(r.gvk, seen)
		}
	}()

	// The cache's own object, read-only: the pass works on a copy, and the status it read is
	// the cache's (or the one read in its place), compared with what the pass makes of it.
	cached := &unstructured.Unstructured{}
	cached.SetGroupVersionKind(r.gvk)
	if err := r.opts.Client.Get(ctx, req.NamespacedName, cached, client.UnsafeDisableDeepCopy); err != nil {
		if apierrors.IsNotFound(err) {
			r.forget(req.NamespacedName)
		}
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	obj := cached.DeepCopy()
	obj.SetGroupVersionKind(r.gvk)
	read := cached.Object["status"]
	// A status this process wrote that the cache does not show yet is read in its place.
	if written, ok := r.statuses.read(obj); ok {
		read = written
	}
	seen = obj
	ctx, leave, err := r.gate.Enter(ctx, req.NamespacedName)
	if err != nil {
		return reconcile.Result{}, err
	}
	defer leave()
	// Each release record the pass reads is read once, what it writes is what it reads after.
	ctx = records.WithMemo(ctx)
	if obj.GetDeletionTimestamp() != nil {
		return r.finalize(ctx, obj)
	}
	if controllerutil.AddFinalizer(obj, Finalizer) {
		if err := r.patchFinalizers(ctx, obj); err != nil {
			return r.conflicted(req.NamespacedName, obj, err)
		}
	}

	defer func() {
		if c := r.coord.Load(); c != nil && c.active.Load() {
			c.wake() // the CR's status may open the gate of a wave
		}
	}()
	return machine.Run(ctx, r.world, obj, read)
}

// patchFinalizers writes obj's finalizers as they are now over those of the version read: the
// merge patch MergeFromWithOptimisticLock sends (the list, and the resourceVersion read, so a
// change in between is a conflict), built without marshalling the whole CR twice. obj takes
// the new resourceVersion; the rest of the reply is not read.
func (r *Reconciler) patchFinalizers(ctx context.Context, obj *unstructured.Unstructured) error {
	data, err := json.Marshal(map[string]any{"metadata": map[string]any{
		"finalizers": obj.GetFinalizers(), "resourceVersion": obj.GetResourceVersion()}})
	if err != nil {
		return err
	}
	key := client.ObjectKeyFromObject(obj)
	res := r.metadataOf(key)
	if err := r.opts.Client.Patch(ctx, res, client.RawPatch(types.MergePatchType, data)); err != nil {
		return err
	}
	obj.SetResourceVersion(res.GetResourceVersion())
	r.statuses.wrote(key, obj.GetUID(), res.GetResourceVersion(), obj.Object["status"], obj.GetFinalizers())
	return nil
}

// conflicted ends a pass whose write of obj's finalizers failed with err. A conflict means
// the API server holds a newer version of the CR than the cache read: the pass is taken again
// when the cache shows it (catchUp lets that update through), not after a back-off that grows
// with each conflict while the cache is behind — after the API server restarts, the watch
// of CRs can lag for seconds, and the update that ends the lag (rudder's own finalizer or
// status write) is one crChanged otherwise filters. The next periodic pass is a backstop.
// Other errors are retried with back-off.
func (r *Reconciler) conflicted(key types.NamespacedName, obj *unstructured.Unstructured, err error) (reconcile.Result, error) {
	if !apierrors.IsConflict(err) {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	r.mu.Lock()
	r.behind[key] = obj.GetResourceVersion()
	r.mu.Unlock()
	cacheBehind.WithLabelValues(r.gvkLabel()).Inc()
	return reconcile.Result{RequeueAfter: machine.Jitter(r.reconcilePeriod())}, nil
}

// catchUp reports whether an update of the CR at key, to version rv, is the one a pass that
// conflicted waits for (see conflicted), and forgets the wait if so.
func (r *Reconciler) catchUp(key types.NamespacedName, rv string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	read, ok := r.behind[key]
	if !ok || read == rv {
		return false
	}
	delete(r.behind, key)
	return true
}

// metadataOf is a CR of the watch's kind as the object a patch of it is made through when
// only the metadata of the API server's reply is read: the client asks for the reply as a
// PartialObjectMetadata, which spares decoding the whole CR.
func (r *Reconciler) metadataOf(key types.NamespacedName) *metav1.PartialObjectMetadata {
	res := &metav1.PartialObjectMetadata{}
	res.SetGroupVersionKind(r.gvk)
	res.SetNamespace(key.Namespace)
	res.SetName(key.Name)
	return res
}

func (r *Reconciler) forget(key types.NamespacedName) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.behind, key)
	r.statuses.forget(key)
	if r.opts.Sources != nil {
		r.opts.Sources.Forget(machine.SourceUser{Queue: r, Key: key})
	}
	r.memory.Forget(key)
}

func (r *Reconciler) event(obj runtime.Object, typ, reason, action, note string, args ...any) {
	r.opts.Recorder.Eventf(obj, nil, typ, reason, action, note, args...)
}

func (r *Reconciler) gvkLabel() string { return r.opts.Watch.String() }

func (r *Reconciler) reconcilePeriod() time.Duration {
	if p := r.opts.Watch.ReconcilePeriod; p != nil && p.Duration > 0 {
		return p.Duration
	}
	return r.opts.ReconcilePeriod
}
