package controllers

import (
	"context"
	"fmt"
	"maps"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/rudder-operator/rudder/internal/gate"
	"github.com/rudder-operator/rudder/internal/machine"
	"github.com/rudder-operator/rudder/internal/records"
)

// watchEvents are the Reconciler's filters and mappers of watch events: which updates of a
// CR take a pass, which CR a release record or an operand belongs to, and the log of each
// pass.
type watchEvents struct{ r *Reconciler }

// SetupWithManager builds the watch's controller: the CRs (filtered by the watch's selector),
// chart changes, and - once a release exists - the kinds of its objects.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	u := CRObject(r.gvk)
	ev := watchEvents{r}
	// More workers than passes that work at once: the gate holds the rest (internal/gate).
	max := gate.PoolSize(workers(r.opts))
	sel := r.opts.Watch.LabelSelector()
	if err := mgr.GetFieldIndexer().IndexField(context.Background(), u, uidIndex, ev.indexedUID); err != nil {
		return fmt.Errorf("indexing %s by UID: %w", r.opts.Watch, err)
	}
	bld, err := ev.dependencyWatches(mgr, ctrl.NewControllerManagedBy(mgr))
	if err != nil {
		return err
	}
	c, err := bld.
		Named(ControllerName(r.gvk)).
		For(u, builder.WithPredicates(
			predicate.NewPredicateFuncs(func(o client.Object) bool { return sel.Matches(labels.Set(o.GetLabels())) }),
			ev.crChanged(), ev.cancelOnDelete())).
		// CRs are handed to the workers round robin over their namespaces (internal/gate, fair.go).
		WithOptions(controller.Options{MaxConcurrentReconciles: max, NewQueue: gate.NewQueue, RateLimiter: gate.RateLimiter()}).
		WithLogConstructor(ev.logConstructor(mgr.GetLogger())).
		WatchesMetadata(records.ReleaseSecret(), handler.EnqueueRequestsFromMapFunc(ev.releaseOwner),
			builder.WithPredicates(ev.foreignRevision())).
		WatchesRawSource(source.Func(func(ctx context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request]) error {
			r.mu.Lock()
			r.queue = q
			r.mu.Unlock()
			return nil
		})).
		Build(r)
	if err != nil {
		return fmt.Errorf("controller for %s: %w", r.opts.Watch, err)
	}
	if r.opts.Dependents != nil {
		r.addWatch = func(gvk schema.GroupVersionKind) error {
			src := source.Kind[client.Object](r.opts.Dependents, machine.OperandObject(gvk), ev.dependentHandler(gvk.GroupKind()))
			if err := c.Watch(src); err != nil {
				return err
			}
			// A started controller registers the handler asynchronously: wait until it is
			// registered and has seen the informer's initial list. An operand deleted before
			// that would otherwise never wake its CR (the informer already forgot it).
			ctx, cancel := context.WithTimeout(context.Background(), watchSyncTimeout)
			defer cancel()
			return src.WaitForSync(ctx)
		}
	}
	if r.opts.Watch.Rollout != nil && !r.opts.RolloutsLater {
		if err := r.SetupRollouts(mgr); err != nil {
			return err
		}
	}
	path := r.opts.Watch.ChartPath()
	r.opts.Charts.Subscribe(func(changed string) {
		if changed != path {
			return
		}
		if c := r.coord.Load(); c != nil {
			c.wake() // a rollout moves the CRs; every CR still reports the chart's state
		}
		go r.enqueueAll(context.Background(), mgr.GetCache())
	})
	return nil
}

// logConstructor is controller-runtime's logger of a controller and of each reconcile, with
// the same names and values. main.go's zap core encodes them only when a line is written
// (cli.LazyFields): a pass that writes no line, as most passes of a converged CR, does not
// pay for encoding them.
func (ev watchEvents) logConstructor(base logr.Logger) func(*reconcile.Request) logr.Logger {
	log := base.WithValues("controller", ControllerName(ev.r.gvk), "controllerGroup", ev.r.gvk.Group, "controllerKind", ev.r.gvk.Kind)
	return func(req *reconcile.Request) logr.Logger {
		if req == nil {
			return log
		}
		return log.WithValues(ev.r.gvk.Kind, klog.KRef(req.Namespace, req.Name), "namespace", req.Namespace, "name", req.Name)
	}
}

// uidIndex indexes by UID the watch's CRs whose release is not named after them, to find the
// owner of a release record (see releaseOwner).
const uidIndex = "rudder.dev/uid"

// indexedUID is uidIndex's value for a CR: its UID, unless its release has the CR's own name
// (no releaseName template, a name within Helm's 53 characters), as most have: releaseOwner
// finds those by name. An entry costs the cache a few hundred bytes per CR.
func (ev watchEvents) indexedUID(o client.Object) []string {
	if cr, ok := o.(*unstructured.Unstructured); ok && ev.r.opts.Watch != nil {
		if name, err := ev.r.opts.Watch.ReleaseNameOf(cr); err == nil && name == cr.GetName() {
			return nil
		}
	}
	return []string{string(o.GetUID())}
}

// foreignRevision passes the release records of this watch's kind that rudder did not make
// from a spec, once their operation is over: a person's helm rollback or upgrade, or rudder's
// own rollback. Their CR learns of them at once (a kept rollback, a failed revision) instead of
// at its next periodic pass. rudder's own installs and upgrades wake nothing: the pass that
// made them already knows.
func (ev watchEvents) foreignRevision() predicate.Predicate {
	kind := records.KindLabel(ev.r.gvk.GroupKind())
	return predicate.NewPredicateFuncs(func(o client.Object) bool {
		l := o.GetLabels()
		if !records.IsReleaseRecord(l) || l[records.LabelOwnerKind] != kind {
			return false
		}
		h := records.HeadOfLabels(l)
		return h != nil && !h.Pending() && !h.MadeByRudder()
	})
}

// releaseOwner maps a release record to its CR, through the owner UID on the record: the CR
// named like the release if it has that UID, else the one uidIndex finds.
func (ev watchEvents) releaseOwner(ctx context.Context, o client.Object) []reconcile.Request {
	uid := o.GetLabels()[records.LabelOwnerUID]
	if uid == "" {
		return nil
	}
	named := CRObject(ev.r.gvk)
	key := client.ObjectKey{Namespace: o.GetNamespace(), Name: o.GetLabels()["name"]}
	if key.Name != "" && ev.r.opts.Client.Get(ctx, key, named, client.UnsafeDisableDeepCopy) == nil && string(named.GetUID()) == uid {
		return []reconcile.Request{{NamespacedName: key}}
	}
	crs := &unstructured.UnstructuredList{}
	crs.SetGroupVersionKind(ev.r.gvk.GroupVersion().WithKind(ev.r.gvk.Kind + "List"))
	if err := ev.r.opts.Client.List(ctx, crs, client.InNamespace(o.GetNamespace()), client.MatchingFields{uidIndex: uid},
		client.UnsafeDisableDeepCopy); err != nil {
		ev.r.log.Error(err, "finding the owner of a release record", "secret", o.GetName())
		return nil
	}
	out := make([]reconcile.Request, 0, len(crs.Items))
	for i := range crs.Items {
		out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&crs.Items[i])})
	}
	return out
}

// crChanged passes CR updates that can matter: spec (generation), labels and annotations
// (selector, pause), deletion, the loss of rudder's finalizer, and the version a pass that
// found the cache behind waits for (see conflicted). Status writes, including rudder's own,
// do not.
func (ev watchEvents) crChanged() predicate.Predicate {
	return predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
		o, n := e.ObjectOld, e.ObjectNew
		return ev.catchUp(client.ObjectKeyFromObject(n), n.GetResourceVersion()) ||
			o.GetGeneration() != n.GetGeneration() ||
			!maps.Equal(o.GetLabels(), n.GetLabels()) ||
			!maps.Equal(o.GetAnnotations(), n.GetAnnotations()) ||
			!equality.Semantic.DeepEqual(o.GetDeletionTimestamp(), n.GetDeletionTimestamp()) ||
			// Someone removed rudder's finalizer (put it back). Its addition is rudder's own
			// write in the middle of a pass, which needs no second pass.
			(controllerutil.ContainsFinalizer(o, Finalizer) && !controllerutil.ContainsFinalizer(n, Finalizer))
	}}
}

// cancelOnDelete cancels the running pass of a CR that is being deleted, so that a wedged
// action gives way to the uninstall at once. It filters nothing.
func (ev watchEvents) cancelOnDelete() predicate.Predicate {
	return predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
		if e.ObjectOld.GetDeletionTimestamp() == nil && e.ObjectNew.GetDeletionTimestamp() != nil {
			ev.r.gate.Cancel(client.ObjectKeyFromObject(e.ObjectNew))
		}
		return true
	}}
}

// SourceChanged queues a CR whose values source changed, as a chart change queues every CR:
// after the chart's quiet period (--chart-debounce), and only once the chart has no change
// waiting for it, so that a chart edit and a source edit made together give one upgrade.
func (r *Reconciler) SourceChanged(key types.NamespacedName) {
	sourceChanges.WithLabelValues(r.gvkLabel()).Inc()
	r.mu.Lock()
	defer r.mu.Unlock()
	r.changedSources[key] = true
	if r.sourcesTimer == nil {
		r.sourcesTimer = time.AfterFunc(r.opts.Charts.Debounce(), r.enqueueChangedSources)
		return
	}
	r.sourcesTimer.Reset(r.opts.Charts.Debounce())
}

func (r *Reconciler) enqueueChangedSources() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.opts.Charts.Pending(r.opts.Watch.ChartPath()) {
		r.sourcesTimer.Reset(r.opts.Charts.Debounce()) // its reload queues every CR
		return
	}
	if r.queue == nil {
		return
	}
	for key := range r.changedSources {
		r.queue.Add(reconcile.Request{NamespacedName: key})
	}
	r.log.Info("values sources changed; queued the CRs that read them", "count", len(r.changedSources))
	clear(r.changedSources)
}

// enqueueAll queues every CR of the kind (after a chart change).
func (r *Reconciler) enqueueAll(ctx context.Context, c client.Reader) {
	q := r.startedQueue()
	if q == nil {
		return
	}
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(r.gvk.GroupVersion().WithKind(r.gvk.Kind + "List"))
	if err := c.List(ctx, list, client.MatchingLabelsSelector{Selector: r.opts.Watch.LabelSelector()}); err != nil {
		r.log.Error(err, "listing CRs after a chart change")
		return
	}
	for i := range list.Items {
		q.Add(reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])})
	}
	r.log.Info("chart changed; queued every CR of the kind", "count", len(list.Items))
}

// watchSyncTimeout bounds the wait for a new dependent watch to be in place; rudder checked
// beforehand that it may list and watch the kind, so this only trips on a sick API server.
const watchSyncTimeout = 2 * time.Minute

// ensureWatch starts watching an operand kind through the dependents cache, once. A failed
// start (e.g. rudder may not list the kind) is forgotten, so that a later pass tries again.
func (r *Reconciler) ensureWatch(ctx context.Context, gvk schema.GroupVersionKind) error {
	if r.addWatch == nil {
		return nil
	}
	r.mu.Lock()
	w, started := r.watching[gvk]
	if !started {
		w = &watchStart{done: make(chan struct{})}
		r.watching[gvk] = w
	}
	r.mu.Unlock()
	if started {
		select {
		case <-w.done:
			return w.err
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	if r.opts.WatchAccess != nil {
		w.err = r.opts.WatchAccess(ctx, gvk)
	}
	if w.err == nil {
		w.err = r.addWatch(gvk)
	}
	if w.err != nil {
		w.err = fmt.Errorf("watching %s: %w", gvk, w.err)
		r.mu.Lock()
		delete(r.watching, gvk)
		r.mu.Unlock()
	}
	close(w.done)
	return w.err
}

// dependentHandler maps an event of an operand of kind gk to its CR (through the rudder.dev/owner
// annotation, for this watch's kind only). Deletions and changes to what the manifest sets (the
// generation: the spec; the labels and annotations its manifest sets) also ask for a drift
// check; status changes, and metadata other controllers keep, only re-evaluate readiness.
func (ev watchEvents) dependentHandler(gk schema.GroupKind) handler.TypedEventHandler[client.Object, reconcile.Request] {
	owner := func(o client.Object) (types.NamespacedName, bool) {
		gk, key, ok := records.ParseOwnerAnnotation(o.GetAnnotations()[records.AnnotationOwner])
		return key, ok && gk == ev.r.gvk.GroupKind()
	}
	type queue = workqueue.TypedRateLimitingInterface[reconcile.Request]
	return handler.TypedFuncs[client.Object, reconcile.Request]{
		CreateFunc: func(_ context.Context, e event.TypedCreateEvent[client.Object], q queue) {
			if key, ok := owner(e.Object); ok {
				q.Add(reconcile.Request{NamespacedName: key})
			}
		},
		UpdateFunc: func(_ context.Context, e event.TypedUpdateEvent[client.Object], q queue) {
			key, ok := owner(e.ObjectNew)
			if !ok {
				return
			}
			ev.r.memory.OperandUpdated(key, gk, e.ObjectOld, e.ObjectNew)
			q.Add(reconcile.Request{NamespacedName: key})
		},
		DeleteFunc: func(_ context.Context, e event.TypedDeleteEvent[client.Object], q queue) {
			if key, ok := owner(e.Object); ok {
				ev.r.memory.MarkDirty(key)
				q.Add(reconcile.Request{NamespacedName: key})
			}
		},
	}
}

// CRObject is an empty CR of a watched kind.
func CRObject(gvk schema.GroupVersionKind) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(gvk)
	return u
}
