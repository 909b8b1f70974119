package controllers

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	rolloutv1 "github.com/rudder-operator/rudder/api/rollout/v1alpha1"
	rstatus "github.com/rudder-operator/rudder/api/status"
	"github.com/rudder-operator/rudder/internal/machine"
	"github.com/rudder-operator/rudder/internal/records"
)

// SetupRollouts starts the watch's coordinator: by SetupWithManager, or, with
// Options.RolloutsLater, by the caller once the API server serves the Rollout kind. Once only.
func (r *Reconciler) SetupRollouts(mgr ctrl.Manager) error {
	c := &coordinator{r: r, steps: waveSteps{r: r}}
	err := ctrl.NewControllerManagedBy(mgr).
		Named("rollout-"+ControllerName(r.gvk)).
		WatchesRawSource(source.Func(func(_ context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request]) error {
			c.mu.Lock()
			c.queue = q
			c.mu.Unlock()
			q.Add(coordinatorRequest)
			return nil
		})).
		Watches(&rolloutv1.Rollout{}, handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
			if ro, ok := o.(*rolloutv1.Rollout); ok && c.owns(ro) {
				return []reconcile.Request{coordinatorRequest}
			}
			return nil
		})).
		WithOptions(controller.Options{MaxConcurrentReconciles: 1}).
		Complete(c)
	if err != nil {
		return fmt.Errorf("rollout controller for %s: %w", r.opts.Watch, err)
	}
	r.coord.Store(c)
	return nil
}

// owns reports whether ro moves this watch's CRs (of this shard).
func (c *coordinator) owns(ro *rolloutv1.Rollout) bool {
	r := c.r
	return ro.Spec.Group == r.gvk.Group && ro.Spec.Version == r.gvk.Version && ro.Spec.Kind == r.gvk.Kind && ro.Spec.Shard == r.opts.Shard
}

// rolloutName is the name of the Rollout that moves the watch's CRs (of this shard) to chart
// digest to.
func (c *coordinator) rolloutName(to string) string {
	return rolloutv1.Name(c.r.gvk, c.r.opts.Shard, to)
}

// Reconcile looks at the watch's rollouts: it starts the one the watch's chart needs,
// supersedes the others, and moves the current one on as its gates allow.
func (c *coordinator) Reconcile(ctx context.Context, _ reconcile.Request) (reconcile.Result, error) {
	r := c.r
	cs, _ := r.opts.Charts.Get(r.opts.Watch.ChartPath())
	if cs.Current == nil {
		return reconcile.Result{}, nil // a chart that never loaded moves nobody
	}
	to := records.LabelDigest(r.opts.Watch.ChartDigest(cs.Current.Digest))
	members, err := c.members(ctx, to)
	if err != nil {
		return reconcile.Result{}, err
	}
	var list rolloutv1.RolloutList
	if err := r.opts.Client.List(ctx, &list); err != nil {
		return reconcile.Result{}, fmt.Errorf("listing rollouts: %w", err)
	}
	var cur *rolloutv1.Rollout
	for i := range list.Items {
		ro := &list.Items[i]
		if !c.owns(ro) {
			continue
		}
		if ro.Spec.To == to {
			cur = ro
			if w := c.current(ro); w != nil {
				cur = w
			}
			continue
		}
		if err := c.supersede(ctx, ro, to); err != nil {
			return reconcile.Result{}, err
		}
	}
	if cur == nil {
		if cur, err = c.start(ctx, to, members); cur == nil || err != nil {
			c.active.Store(false)
			return reconcile.Result{}, err
		}
	}
	before := cur.Status.DeepCopy()
	clear(c.steps.moving)
	requeue := c.steps.advance(cur, members)
	c.active.Store(requeue > 0)
	if !equality.Semantic.DeepEqual(before, &cur.Status) {
		stale := cur.ResourceVersion
		if err := r.opts.Client.Status().Update(ctx, cur); err != nil {
			if apierrors.IsConflict(err) {
				// Someone else's edit (an annotation): decide again from it.
				return reconcile.Result{RequeueAfter: time.Second}, nil
			}
			return reconcile.Result{}, fmt.Errorf("updating rollout %s: %w", cur.Name, err)
		}
		c.mu.Lock()
		c.written, c.stale = cur.DeepCopy(), stale
		c.mu.Unlock()
	}
	for key := range c.steps.moving {
		r.enqueue(key)
	}
	c.steps.observe(members)
	return reconcile.Result{RequeueAfter: requeue}, nil
}

// members are the CRs of the kind, with what the rollout to digest to needs of each.
func (c *coordinator) members(ctx context.Context, to string) ([]member, error) {
	r := c.r
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(r.gvk.GroupVersion().WithKind(r.gvk.Kind + "List"))
	if err := r.opts.Client.List(ctx, list, client.MatchingLabelsSelector{Selector: r.opts.Watch.LabelSelector()},
		client.UnsafeDisableDeepCopy); err != nil {
		return nil, fmt.Errorf("listing %s: %w", r.opts.Watch, err)
	}
	out := make([]member, 0, len(list.Items))
	for i := range list.Items {
		u := &list.Items[i]
		if u.GetDeletionTimestamp() != nil {
			continue
		}
		m := member{key: client.ObjectKeyFromObject(u), order: machine.RolloutKey(u.GetNamespace(), u.GetName()), labels: u.GetLabels(),
			held: u.GetAnnotations()[machine.AnnotationRolloutHold] == "true"}
		m.digest, _, _ = unstructured.NestedString(u.Object, "status", "release", "chartDigest")
		conds := rstatus.ConditionsOf(u)
		observed, _, _ := unstructured.NestedInt64(u.Object, "status", "observedGeneration")
		ready := meta.IsStatusConditionTrue(conds, rstatus.TypeReady) && observed == u.GetGeneration()
		if r.opts.Watch.Policies().Tests().Enabled() {
			ready = ready && meta.IsStatusConditionTrue(conds, rstatus.TypeTested)
		}
		m.ready = m.digest == to && ready
		if fd, _, _ := unstructured.NestedString(u.Object, "status", "release", "failed", "chartDigest"); fd == to {
			reason, _, _ := unstructured.NestedString(u.Object, "status", "release", "failed", "reason")
			m.failed = cmp.Or(reason, "failed")
		}
		if rc := meta.FindStatusCondition(conds, rstatus.TypeRollout); rc != nil && rc.Reason == rstatus.ReasonRolloutKept {
			m.kept = true
		}
		out = append(out, m)
	}
	slices.SortFunc(out, func(a, b member) int { return strings.Compare(a.order, b.order) })
	return out, nil
}

// start creates the Rollout to digest to, when a CR with a release is on another chart; nil
// when none is (nothing to roll out).
func (c *coordinator) start(ctx context.Context, to string, members []member) (*rolloutv1.Rollout, error) {
	r := c.r
	pol := r.opts.Watch.Rollout
	from := map[string]int{}
	for _, m := range members {
		if m.digest != "" && m.digest != to {
			from[m.digest]++
		}
	}
	if len(from) == 0 {
		return nil, nil
	}
	most := ""
	for d, n := range from {
		if most == "" || n > from[most] || (n == from[most] && d < most) {
			most = d
		}
	}
	ro := &rolloutv1.Rollout{ObjectMeta: metav1.ObjectMeta{Name: c.rolloutName(to)},
		Spec: rolloutv1.RolloutSpec{Group: r.gvk.Group, Version: r.gvk.Version, Kind: r.gvk.Kind, Shard: r.opts.Shard, From: most, To: to}}
	for _, wv := range c.steps.waves() {
		ro.Spec.Waves = append(ro.Spec.Waves, wv.String())
	}
	if pol.Paused {
		ro.Annotations = map[string]string{rolloutv1.AnnotationPaused: "true"}
	}
	if err := r.opts.Client.Create(ctx, ro); err != nil {
		return nil, fmt.Errorf("creating rollout %s: %w", ro.Name, err)
	}
	r.event(ro, corev1.EventTypeNormal, "Started", "Rollout", "chart %s of %s: %d CRs on other charts move in %d waves (%s)",
		records.DisplayDigest(to), r.opts.Watch, membersBehind(members, to), len(ro.Spec.Waves), strings.Join(ro.Spec.Waves, ", "))
	return ro, nil
}

func membersBehind(members []member, to string) int {
	n := 0
	for _, m := range members {
		if m.digest != to {
			n++
		}
	}
	return n
}

// supersede ends a rollout that is not of the watch's chart any more.
func (c *coordinator) supersede(ctx context.Context, ro *rolloutv1.Rollout, to string) error {
	switch ro.Status.Phase {
	case rolloutv1.PhaseComplete, rolloutv1.PhaseRolledBack, rolloutv1.PhaseSuperseded:
		return nil
	}
	ro.Status.Phase = rolloutv1.PhaseSuperseded
	ro.Status.Message = fmt.Sprintf("superseded by the rollout of chart %s (%s)", records.DisplayDigest(to), c.rolloutName(to))
	if err := c.r.opts.Client.Status().Update(ctx, ro); err != nil {
		return fmt.Errorf("superseding rollout %s: %w", ro.Name, err)
	}
	rollouts.WithLabelValues(c.r.gvkLabel(), rolloutv1.PhaseSuperseded).Inc()
	c.r.event(ro, corev1.EventTypeNormal, rolloutv1.PhaseSuperseded, "Rollout", "%s", ro.Status.Message)
	return nil
}
