package machine

import (
	"context"
	"errors"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"
	"sigs.k8s.io/controller-runtime/pkg/client"

	rstatus "github.com/rudder-operator/rudder/api/status"
	"github.com/rudder-operator/rudder/internal/helm"
	"github.com/rudder-operator/rudder/internal/hook"
	"github.com/rudder-operator/rudder/internal/watches"
)

// notReadyRequeue is how soon a pass looks again at objects that are not ready when no
// dependent watch will announce their change.
const notReadyRequeue = 5 * time.Second

// settler is the step of a pass after its actions, on the revision the pass ended on (or a
// hold): it looks at the revision's objects, has drift restored, judges their readiness, and
// runs the post-release hooks.
type settler struct {
	sub     *subject
	relName string
}

// settle looks at the objects of the revision o ended on: whether they drifted, which restore
// (the actor's walk over the one action on objects) acts on, and their readiness; then it runs
// the post-release hooks.
func (se settler) settle(ctx context.Context, o *outcome, restore func(context.Context, *outcome) error) {
	if o.head != nil && !se.settleObjects(ctx, o, restore) {
		return
	}
	var hrel *hook.Release
	if o.head != nil {
		hrel = &hook.Release{Name: se.relName, Namespace: se.sub.key.Namespace, Revision: o.head.Revision, Status: o.head.Status,
			Objects: o.objects}
	}
	w := se.sub.w
	for _, h := range w.Hooks.PostReleaseHooks(w.gvk()) {
		start := w.Clock.Now()
		d, err := h.PostRelease(ctx, se.sub.obj, hrel, w.reader())
		observeHook(w.label(), "post", w.Clock.Since(start), err)
		if err != nil {
			o.hookFailed(fmt.Sprintf("post-release hook %T", h), err)
			return
		}
		o.requeueIn(d)
	}
}

func (se settler) settleObjects(ctx context.Context, o *outcome, restore func(context.Context, *outcome) error) bool {
	sub, w := se.sub, se.sub.w
	// Drift is checked, and the objects may be needed whole, when the operands are watched and
	// the release is not held, unless Helm just applied them.
	watched := o.phase != phaseHeld && w.Operands != nil
	mode := w.Watch.Policies().DriftMode()
	checkDrift := watched && !o.applied && mode != watches.DriftDisabled
	var err error
	if o.objects, o.whole, err = se.loadObjects(ctx, o, checkDrift); err != nil {
		reason := rstatus.ReasonReconcileError
		if ae := (*AccessError)(nil); errors.As(err, &ae) {
			reason = rstatus.ReasonForbidden
		}
		o.fail(reason, err)
		return false
	}
	switch {
	case checkDrift:
		due, err := se.driftDue(ctx, o, w.Memory.takeDrift(sub.key, sub.obj.GetUID()))
		if err == nil && due {
			err = restore(ctx, o)
		}
		if err != nil {
			o.fail(rstatus.ReasonReconcileError, err)
			return false
		}
	case watched:
		// Nothing to correct right after Helm applied it (or, with driftDetection.mode
		// disabled, ever). A change made meanwhile keeps its mark for the pass its event causes.
		w.Memory.markVerified(sub.key, sub.obj.GetUID())
		if o.applied && mode == watches.DriftWarn {
			o.add(nil, result{conditions: map[string]*condition{rstatus.TypeDrifted: {metav1.ConditionFalse, rstatus.ReasonNoDrift,
				fmt.Sprintf("revision %d: applied by Helm just now", o.head.Revision)}}})
		}
	}
	if o.ready, err = se.readiness(ctx, o); err != nil {
		o.fail(rstatus.ReasonReconcileError, err)
		return false
	}
	return true
}

// loadObjects gets the objects of o's head revision — whole when this pass parsed the
// manifest and wantWhole, else their identities (see Memory.manifestObjects; those of a
// revision the pass made come from Helm's client) — and makes sure every kind in it has a
// dependent watch.
func (se settler) loadObjects(ctx context.Context, o *outcome, wantWhole bool) (objs []*unstructured.Unstructured, whole bool, err error) {
	head, rel := o.head, o.rel
	if ids, ok := se.sub.w.Memory.cachedManifest(se.sub.key, head.Revision); ok {
		return ids, false, nil
	}
	switch {
	case o.made != nil && !wantWhole && rel != nil && rel.Version == head.Revision:
		objs = o.made
		se.sub.w.Memory.rememberObjects(se.sub.key, head.Revision, objs)
	default:
		if rel == nil || rel.Version != head.Revision {
			if rel, err = se.sub.w.Helm.History.Last(ctx, se.sub.scope, se.relName); err != nil {
				return nil, false, err
			}
			if rel == nil {
				return nil, false, fmt.Errorf("release %s disappeared", se.relName)
			}
		}
		if objs, err = se.sub.w.Memory.manifestObjects(se.sub.key, rel, wantWhole, se.sub.w.Mapper); err != nil {
			return nil, false, err
		}
		o.serverSide = rel.ServerSideApply
	}
	for _, obj := range objs {
		if err := se.sub.w.Watches.EnsureWatch(ctx, obj.GroupVersionKind()); err != nil {
			return nil, false, err
		}
	}
	return objs, wantWhole, nil
}

// driftDue reports whether the objects are to be restored, as d marks them: when an operand
// was only not seen in the cache, and the cache now holds every object, there is nothing to
// restore and nothing is read.
func (se settler) driftDue(ctx context.Context, o *outcome, d drift) (bool, error) {
	if d == 0 {
		return false, nil
	}
	if d == driftMissing {
		present, err := se.allCached(ctx, o.objects)
		if err != nil || present {
			return false, err
		}
	}
	return true, nil
}

// allCached reports whether the operand cache holds every object.
func (se settler) allCached(ctx context.Context, objs []*unstructured.Unstructured) (bool, error) {
	for _, want := range objs {
		_, err := se.sub.w.operand(ctx, want)
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		if err != nil {
			return false, err
		}
	}
	return true, nil
}

// readiness is kstatus's view of the live objects. A held release (a hook said "not now") is
// reported as it is: nothing would restore a missing object, so none is waited for.
func (se settler) readiness(ctx context.Context, o *outcome) (*readiness, error) {
	held := o.phase == phaseHeld
	r := &readiness{revision: o.head.Revision, count: len(o.objects)}
	for _, want := range o.objects {
		live, err := se.sub.w.operand(ctx, want)
		if apierrors.IsNotFound(err) {
			// Helm made it just now, and the cache shows it on its create event: judged as Helm
			// sent it, which is what kstatus finds of it before a controller acts on it. A
			// release whose objects are current when made is Ready in the status its install
			// writes, with no second write.
			if sent := o.sent(want); sent != nil {
				live, err = sent, nil
			}
		}
		if apierrors.IsNotFound(err) {
			// Deleted (its event may not have come yet) or not in the cache yet: look again, and
			// let that pass restore it if it is really gone. Right after Helm created it, the
			// cache is simply behind: its create event brings the next pass.
			r.waiting = append(r.waiting, helm.Describe(want)+": not found")
			if !held {
				if !o.applied {
					se.sub.w.Memory.markMissing(se.sub.key)
				}
				o.requeueIn(Jitter(notReadyRequeue))
			}
			continue
		}
		if err != nil {
			return nil, err
		}
		verdict, msg, err := se.verdict(want.GroupVersionKind(), live)
		if err != nil {
			return nil, fmt.Errorf("status of %s: %w", helm.Describe(want), err)
		}
		switch verdict {
		case status.CurrentStatus:
		case status.FailedStatus:
			r.failed = append(r.failed, helm.Describe(want)+": "+msg)
		default:
			r.waiting = append(r.waiting, helm.Describe(want)+": "+msg)
		}
	}
	if len(r.failed) == 0 && len(r.waiting) > 0 && se.sub.w.Operands == nil {
		o.requeueIn(Jitter(notReadyRequeue))
	}
	return r, nil
}

// verdict is the watch's healthChecks' verdict on live, of kind gvk, where they judge the
// kind, else kstatus's.
func (se settler) verdict(gvk schema.GroupVersionKind, live client.Object) (status.Status, string, error) {
	w := se.sub.w.Watch
	if !w.Health().Judges(gvk) {
		return operandStatus(live)
	}
	var obj map[string]any
	if u, ok := live.(*unstructured.Unstructured); ok {
		obj = u.Object
	} else {
		var err error
		if obj, err = runtime.DefaultUnstructuredConverter.ToUnstructured(live); err != nil {
			return "", "", err
		}
	}
	verdict, msg, _ := w.Health().Status(gvk, obj)
	return verdict, msg, nil
}
