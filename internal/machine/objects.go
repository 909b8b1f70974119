package machine

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"
	"sigs.k8s.io/controller-runtime/pkg/client"

	rstatus "github.com/rudder-operator/rudder/api/status"
	"github.com/rudder-operator/rudder/internal/guard"
	"github.com/rudder-operator/rudder/internal/helm"
	"github.com/rudder-operator/rudder/internal/hook"
	"github.com/rudder-operator/rudder/internal/plan"
	"github.com/rudder-operator/rudder/internal/watches"
)

// notReadyRequeue is how soon a pass looks again at objects that are not ready when no
// dependent watch will announce their change.
const notReadyRequeue = 5 * time.Second

// settle looks at the objects of the revision the pass ended on: it restores drift (the one
// action on objects) and computes their readiness; then it runs the post-release hooks.
func (p *pass) settle(ctx context.Context, o *outcome) {
	if o.head != nil && !p.settleObjects(ctx, o) {
		return
	}
	var hrel *hook.Release
	if o.head != nil {
		hrel = &hook.Release{Name: p.relName, Namespace: p.key.Namespace, Revision: o.head.Revision, Status: o.head.Status, Objects: o.objects}
	}
	for _, h := range p.w.Hooks.PostReleaseHooks(p.w.gvk()) {
		start := p.w.Clock.Now()
		d, err := h.PostRelease(ctx, p.obj, hrel, p.w.reader())
		observeHook(p.w.label(), "post", p.w.Clock.Since(start), err)
		if err != nil {
			o.hookFailed(fmt.Sprintf("post-release hook %T", h), err)
			return
		}
		o.requeueIn(d)
	}
}

func (p *pass) settleObjects(ctx context.Context, o *outcome) bool {
	// Drift is checked, and the objects may be needed whole, when the operands are watched and
	// the release is not held, unless Helm just applied them.
	watched := o.phase != phaseHeld && p.w.Operands != nil
	mode := p.w.Watch.DriftMode()
	checkDrift := watched && !o.applied && mode != watches.DriftDisabled
	var err error
	if o.objects, o.whole, err = p.loadObjects(ctx, o, checkDrift); err != nil {
		reason := rstatus.ReasonReconcileError
		if ae := (*AccessError)(nil); errors.As(err, &ae) {
			reason = rstatus.ReasonForbidden
		}
		o.fail(reason, err)
		return false
	}
	switch {
	case checkDrift:
		if err := p.checkDrift(ctx, o, p.w.Memory.takeDrift(p.key, p.obj.GetUID())); err != nil {
			o.fail(rstatus.ReasonReconcileError, err)
			return false
		}
	case watched:
		// Nothing to correct right after Helm applied it (or, with driftDetection.mode
		// disabled, ever). A change made meanwhile keeps its mark for the pass its event causes.
		p.w.Memory.markVerified(p.key, p.obj.GetUID())
		if o.applied && mode == watches.DriftWarn {
			o.add(nil, result{conditions: map[string]*condition{rstatus.TypeDrifted: {metav1.ConditionFalse, rstatus.ReasonNoDrift,
				fmt.Sprintf("revision %d: applied by Helm just now", o.head.Revision)}}})
		}
	}
	if o.ready, err = p.readiness(ctx, o); err != nil {
		o.fail(rstatus.ReasonReconcileError, err)
		return false
	}
	return true
}

// loadObjects gets the objects of o's head revision — whole when this pass parsed the
// manifest and wantWhole, else their identities (see Memory.manifestObjects; those of a
// revision the pass made come from Helm's client) — and makes sure every kind in it has a
// dependent watch.
func (p *pass) loadObjects(ctx context.Context, o *outcome, wantWhole bool) (objs []*unstructured.Unstructured, whole bool, err error) {
	head, rel := o.head, o.rel
	if ids, ok := p.w.Memory.cachedManifest(p.key, head.Revision); ok {
		return ids, false, nil
	}
	switch {
	case o.made != nil && !wantWhole && rel != nil && rel.Version == head.Revision:
		objs = o.made
		p.w.Memory.rememberObjects(p.key, head.Revision, objs)
	default:
		if rel == nil || rel.Version != head.Revision {
			if rel, err = p.w.Helm.Last(ctx, p.scope, p.relName); err != nil {
				return nil, false, err
			}
			if rel == nil {
				return nil, false, fmt.Errorf("release %s disappeared", p.relName)
			}
		}
		if objs, err = p.w.Memory.manifestObjects(p.key, rel, wantWhole, p.w.Mapper); err != nil {
			return nil, false, err
		}
		o.serverSide = rel.ServerSideApply
	}
	for _, obj := range objs {
		if err := p.w.Watches.EnsureWatch(ctx, obj.GroupVersionKind()); err != nil {
			return nil, false, err
		}
	}
	return objs, wantWhole, nil
}

// checkDrift restores drift as d asks: when an operand was only not seen in the cache, and the
// cache now holds every object, there is nothing to restore and nothing is read.
func (p *pass) checkDrift(ctx context.Context, o *outcome, d drift) error {
	if d == 0 {
		return nil
	}
	if d == driftMissing {
		present, err := p.allCached(ctx, o.objects)
		if err != nil || present {
			return err
		}
	}
	// The release's actions are done: what is left to choose is the action on its objects.
	c, _ := plan.Next(plan.Situation{DriftDue: true, Taken: o.taken})
	if c.None() {
		return nil
	}
	if res := p.take(ctx, c, observed{head: o.head, rel: o.rel}, o); res.verdict != succeeded {
		return res.err
	}
	return nil
}

// allCached reports whether the operand cache holds every object.
func (p *pass) allCached(ctx context.Context, objs []*unstructured.Unstructured) (bool, error) {
	for _, want := range objs {
		_, err := p.w.operand(ctx, want)
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		if err != nil {
			return false, err
		}
	}
	return true, nil
}

// reapply re-applies what the head revision's manifest sets on objects someone changed or
// deleted, without a new revision: the action on drift.
type reapply struct {
	// objects are the revision's objects, whole or their identities; serverSide, when they
	// are whole: the revision applies server-side.
	objects    []*unstructured.Unstructured
	whole      bool
	serverSide bool
}

func (reapply) name() plan.Action { return plan.Reapply }

func (a reapply) run(ctx context.Context, e *env, obs observed) result {
	fail := func(err error) result {
		// Every pass checks again, not only the first after the change.
		return result{verdict: retry, reason: rstatus.ReasonReconcileError, err: err, recheck: true}
	}
	// The same confinement as every action: a release made before the watch became stricter
	// is not restored where it may no longer act.
	if err := e.scope.CheckObjects(e.mapper, a.objects); err != nil {
		return fail(fmt.Errorf("not restoring revision %d: %w", obs.head.Revision, err))
	}
	w, err := e.helm.Writer(e.scope)
	if err != nil {
		return result{verdict: retry, reason: rstatus.ReasonReconcileError, err: err}
	}
	objs, serverSide, err := e.wholeObjects(ctx, a, obs)
	if err != nil {
		return result{verdict: retry, reason: rstatus.ReasonReconcileError, err: err}
	}
	// The carried labels are the CR's now, not those stored with the revision (an adoption).
	objs = helm.WithCarried(objs, e.carriedKeys, e.carried)
	// Live objects are read from the API server, as the identity that writes them: the operand
	// cache keeps only what a pass reads (see OperandTransform). rudder's
	// own writer is the manager's client, whose reads are cached: read through the uncached
	// reader instead.
	var live client.Reader = w
	if e.scope.ServiceAccount == "" {
		live = e.live
	}
	d := helm.Drift{Warn: e.watch.DriftMode() == watches.DriftWarn, Ignored: e.watch.DriftIgnored,
		ServerSide: serverSide, Release: e.release, Namespace: e.scope.Namespace}
	restored, drifted, err := helm.Reapply(ctx, objs, live, w, d)
	res := result{verdict: succeeded}
	if d.Warn && err == nil {
		res.conditions = map[string]*condition{rstatus.TypeDrifted: driftedCondition(obs.head.Revision, drifted)}
		if len(drifted) > 0 {
			res.notes = []note{{corev1.EventTypeWarning, rstatus.ReasonDriftDetected, "DetectDrift", res.conditions[rstatus.TypeDrifted].message}}
		}
	}
	if len(restored) > 0 {
		res.call, res.restored = callOK, len(restored)
		res.notes = []note{{corev1.EventTypeNormal, rstatus.ReasonDriftCorrected, "CorrectDrift",
			fmt.Sprintf("restored from revision %d without a new revision: %s", obs.head.Revision, strings.Join(restored, ", "))}}
	}
	if err != nil {
		f := fail(err)
		f.notes, f.call = res.notes, callFailed
		return f
	}
	return res
}

// driftedCondition is Drifted as a look at revision's objects in warn mode found them.
func driftedCondition(revision int, drifted []helm.Drifted) *condition {
	if len(drifted) == 0 {
		return &condition{metav1.ConditionFalse, rstatus.ReasonNoDrift, fmt.Sprintf("revision %d: the objects have every field the manifest sets", revision)}
	}
	parts := make([]string, len(drifted))
	for i, d := range drifted {
		parts[i] = d.String()
	}
	return &condition{metav1.ConditionTrue, rstatus.ReasonDriftDetected, fmt.Sprintf("revision %d: %s differ from the manifest; not restored (driftDetection.mode is warn)",
		revision, strings.Join(parts, "; "))}
}

// wholeObjects are the head revision's objects as its manifest has them, and whether the
// revision applies server-side.
func (e *env) wholeObjects(ctx context.Context, a reapply, obs observed) ([]*unstructured.Unstructured, bool, error) {
	if a.whole {
		return a.objects, a.serverSide, nil
	}
	rel := obs.rel
	if rel == nil || rel.Version != obs.head.Revision {
		var err error
		if rel, err = e.helm.Revision(ctx, e.scope, e.release, obs.head.Revision); err != nil {
			return nil, false, err
		}
		if rel == nil {
			return nil, false, fmt.Errorf("revision %d of release %s disappeared", obs.head.Revision, e.release)
		}
	}
	objs, err := helm.ParseManifest(rel.Manifest, rel.Namespace, e.mapper)
	return objs, rel.ServerSideApply, err
}

// readiness is kstatus's view of the live objects. A held release (a hook said "not now") is
// reported as it is: nothing would restore a missing object, so none is waited for.
func (p *pass) readiness(ctx context.Context, o *outcome) (*readiness, error) {
	held := o.phase == phaseHeld
	r := &readiness{revision: o.head.Revision, count: len(o.objects)}
	for _, want := range o.objects {
		live, err := p.w.operand(ctx, want)
		if apierrors.IsNotFound(err) {
			// Deleted (its event may not have come yet) or not in the cache yet: look again, and
			// let that pass restore it if it is really gone. Right after Helm created it, the
			// cache is simply behind: its create event brings the next pass.
			r.waiting = append(r.waiting, helm.Describe(want)+": not found")
			if !held {
				if !o.applied {
					p.w.Memory.markMissing(p.key)
				}
				o.requeueIn(Jitter(notReadyRequeue))
			}
			continue
		}
		if err != nil {
			return nil, err
		}
		verdict, msg, err := p.verdict(want.GroupVersionKind(), live)
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
	if len(r.failed) == 0 && len(r.waiting) > 0 && p.w.Operands == nil {
		o.requeueIn(Jitter(notReadyRequeue))
	}
	return r, nil
}

// verdict is the watch's healthChecks' verdict on live, of kind gvk, where they judge the
// kind, else kstatus's.
func (p *pass) verdict(gvk schema.GroupVersionKind, live client.Object) (status.Status, string, error) {
	w := p.w.Watch
	if !w.Judges(gvk) {
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
	verdict, msg, _ := w.Health(gvk, obj)
	return verdict, msg, nil
}

// isChartError: the chart rendered objects outside its scope, against its ownership rules,
// of unknown kinds or beyond its limits; nothing was applied.
func isChartError(err error) bool {
	var ce *guard.ConfinementError
	var ue *guard.UnknownKindError
	var le *helm.LimitError
	return errors.As(err, &ce) || errors.As(err, &ue) || errors.As(err, &le)
}

// isTransient: errors worth retrying as they are (the API server was briefly unreachable or
// overloaded), as opposed to what the chart and values caused.
func isTransient(err error) bool {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return true
	}
	var ne net.Error
	if errors.As(err, &ne) || helm.IsUnavailable(err) {
		return true
	}
	return apierrors.IsServerTimeout(err) || apierrors.IsTimeout(err) || apierrors.IsTooManyRequests(err) ||
		apierrors.IsServiceUnavailable(err) || apierrors.IsInternalError(err) || apierrors.IsConflict(err)
}
