package controllers

import (
	"context"
	"encoding/json"
	"strings"
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
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	rolloutv1 "github.com/rudder-operator/rudder/api/rollout/v1alpha1"
	"github.com/rudder-operator/rudder/internal/chartsource"
	"github.com/rudder-operator/rudder/internal/gate"
	"github.com/rudder-operator/rudder/internal/hook"
	"github.com/rudder-operator/rudder/internal/machine"
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
	// inventory is what the kind's schema was seen to do with status.inventory (see
	// statusWriter.KeepsInventory).
	inventory atomic.Int32
	// changedSources are the CRs whose values sources changed, queued once the chart's quiet
	// period is over (see SourceChanged).
	changedSources map[types.NamespacedName]bool
	sourcesTimer   *time.Timer
	// deps joins the watches' dependsOn (nil: no watch has one); see Join.
	deps *Dependencies
}

// workers is how many passes of the watch's kind work at once.
func workers(opts Options) int {
	n := opts.Watch.MaxConcurrentReconciles
	if n <= 0 {
		n = opts.MaxConcurrentReconciles
	}
	return max(n, 1)
}

// patch writes obj's finalizers as they are now over those of the version read: the
// merge patch MergeFromWithOptimisticLock sends (the list, and the resourceVersion read, so a
// change in between is a conflict), built without marshalling the whole CR twice. obj takes
// the new resourceVersion; the rest of the reply is not read.
func (f finalizers) patch(ctx context.Context, obj *unstructured.Unstructured) error {
	r := f.r
	data, err := json.Marshal(map[string]any{"metadata": map[string]any{
		"finalizers": obj.GetFinalizers(), "resourceVersion": obj.GetResourceVersion()}})
	if err != nil {
		return err
	}
	key := client.ObjectKeyFromObject(obj)
	res := metadataOf(r.gvk, key)
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
func (ev watchEvents) catchUp(key types.NamespacedName, rv string) bool {
	r := ev.r
	r.mu.Lock()
	defer r.mu.Unlock()
	read, ok := r.behind[key]
	if !ok || read == rv {
		return false
	}
	delete(r.behind, key)
	return true
}

// metadataOf is a CR of kind gvk as the object a patch of it is made through when
// only the metadata of the API server's reply is read: the client asks for the reply as a
// PartialObjectMetadata, which spares decoding the whole CR.
func metadataOf(gvk schema.GroupVersionKind, key types.NamespacedName) *metav1.PartialObjectMetadata {
	res := &metav1.PartialObjectMetadata{}
	res.SetGroupVersionKind(gvk)
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

// coordinator moves the rollouts of one watch from wave to wave (see rollout.go). It runs in
// the leader (of the shard), one reconcile at a time, from what the caches show: the watch's
// CRs and their status, and the Rollout objects. Its state is the Rollout's status, so a
// restart or a failover continues where it was; it wakes on chart edits, on edits of a
// Rollout (annotations), after passes of the kind while a rollout is under way, and every
// coordinatorPoll while one is.
type coordinator struct {
	r *Reconciler

	mu    sync.Mutex
	queue workqueue.TypedRateLimitingInterface[reconcile.Request]
	// active: a rollout of the watch is Progressing, Paused or rolling back.
	active atomic.Bool
	// written is the Rollout as the coordinator last wrote it, and stale the resourceVersion
	// it had before: a cache that still shows that version is behind the write, and the
	// coordinator goes on from what it wrote instead.
	written *rolloutv1.Rollout
	stale   string
	steps   waveSteps
}

// current is the Rollout named name as the pass should see it: the one the coordinator wrote
// last while the cache still shows the version before (nil: the cache's is current).
func (c *coordinator) current(cached *rolloutv1.Rollout) *rolloutv1.Rollout {
	c.mu.Lock()
	defer c.mu.Unlock()
	if w := c.written; w != nil && w.Name == cached.Name && cached.ResourceVersion == c.stale {
		return w.DeepCopy()
	}
	return nil
}

var coordinatorRequest = reconcile.Request{NamespacedName: types.NamespacedName{Name: "rollout"}}

// wake asks for a look at the watch's rollouts.
func (c *coordinator) wake() {
	c.mu.Lock()
	q := c.queue
	c.mu.Unlock()
	if q != nil {
		q.Add(coordinatorRequest)
	}
}

// watchStart is one attempt to start a dependent watch; passes that need the same kind
// meanwhile wait for its outcome instead of reading through a watch that is not there.
type watchStart struct {
	done chan struct{}
	err  error
}

// ControllerName is the controller (and metrics) name of a watch: kind.group-version, lowercase.
func ControllerName(gvk schema.GroupVersionKind) string {
	return strings.ToLower(gvk.Kind + "." + gvk.Group + "-" + gvk.Version)
}
