package controllers

import (
	"context"
	"errors"
	"fmt"
	"net"
	"reflect"
	"strings"
	"time"

	"github.com/go-logr/logr"
	"helm.sh/helm/v3/pkg/release"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	rstatus "github.com/rudder-operator/rudder/api/status"
	"github.com/rudder-operator/rudder/controllers/hook"
	"github.com/rudder-operator/rudder/internal/chartsource"
	"github.com/rudder-operator/rudder/internal/helm"
)

// notReadyRequeue is how soon a pass looks again at objects that are not ready when no
// dependent watch will announce their change.
const notReadyRequeue = 5 * time.Second

// pass is one reconcile of one CR. It edits the CR's status in memory; persist writes it once.
type pass struct {
	r   *Reconciler
	obj *unstructured.Unstructured
	// origStatus is the CR's status as read, to patch only what the pass changed.
	origStatus any
	// log names the CR (controller-runtime's keys); lines add the release.
	log logr.Logger
	key types.NamespacedName
	gen int64
	st  rstatus.Common
	// scope is who acts for the release (rudder, or the tenant's ServiceAccount) and where.
	scope helm.Scope

	snap     *chartsource.Snapshot
	values   map[string]any
	want     helm.Desired
	relName  string
	requeue  time.Duration
	objects  []*unstructured.Unstructured
	revision int
	// applied: this pass installed or upgraded, so Helm has just applied every object of the
	// head revision (creating missing ones, merging edited ones back).
	applied bool
	// preflighted: the values were validated (and overrides announced) by this pass.
	preflighted bool
	// rolledBack: this pass rolled the release back (rudder.dev/rollback-to) and announced it;
	// the cache does not know the new revision yet.
	rolledBack bool
}

func newPass(r *Reconciler, obj *unstructured.Unstructured) *pass {
	p := &pass{r: r, obj: obj, origStatus: runtime.DeepCopyJSONValue(obj.Object["status"]), key: client.ObjectKeyFromObject(obj), gen: obj.GetGeneration(),
		scope: r.scope(obj.GetNamespace())}
	p.st.Conditions = Conditions(obj)
	p.st.ObservedGeneration, _, _ = unstructured.NestedInt64(obj.Object, "status", "observedGeneration")
	if m, ok, _ := unstructured.NestedMap(obj.Object, "status", "release"); ok {
		var rel rstatus.Release
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(m, &rel); err == nil {
			p.st.Release = &rel
		}
	}
	return p
}

func (p *pass) set(typ string, s metav1.ConditionStatus, reason, msg string) {
	meta.SetStatusCondition(&p.st.Conditions, metav1.Condition{
		Type: typ, Status: s, Reason: reason, Message: truncate(msg, 4000), ObservedGeneration: p.gen,
	})
}

func (p *pass) cond(typ string) *metav1.Condition {
	return meta.FindStatusCondition(p.st.Conditions, typ)
}

// stall records a condition that only a change to the CR, chart or cluster can clear.
func (p *pass) stall(reason, msg string) error {
	p.set(rstatus.TypeReleased, metav1.ConditionFalse, reason, msg)
	p.set(rstatus.TypeStalled, metav1.ConditionTrue, reason, msg)
	p.set(rstatus.TypeReconciling, metav1.ConditionFalse, reason, msg)
	p.set(rstatus.TypeReady, metav1.ConditionFalse, reason, msg)
	p.st.ObservedGeneration = p.gen
	p.setState("Stalled")
	return fmt.Errorf("%w: %s: %s", errStalled, reason, msg)
}

// event records an Event on the CR and logs the same line (with the CR and the release), so
// that every release action and failure is in both.
func (p *pass) event(typ, reason, action, note string, args ...any) {
	p.r.event(p.obj, typ, reason, action, note, args...)
	// "release" is added per line, not with WithValues per pass: zap encodes WithValues eagerly,
	// a cost every idle pass would pay for lines it rarely writes.
	p.log.Info(fmt.Sprintf(note, args...), "release", p.relName, "event", typ, "reason", reason, "action", action)
}

// forbidden records an action the API server refused to the identity the release acts as
// (rudder's ClusterRole, or the tenant's ServiceAccount, lacks a rule for something the chart
// renders or reads). Unlike a chart error it is retried with
// back-off, so granting the rule recovers without touching the CR.
func (p *pass) forbidden(action string, err error) error {
	hint := "grant the missing rule in rudder's ClusterRole (config/rbac/role.yaml)"
	if p.scope.ServiceAccount != "" {
		hint = fmt.Sprintf("the release acts as ServiceAccount %s/%s: grant the missing rule to it (a Role in its namespace)",
			p.scope.Namespace, p.scope.ServiceAccount)
	}
	msg := err.Error() + "; " + hint + "; the release is retried with back-off"
	p.event(corev1.EventTypeWarning, rstatus.ReasonForbidden, action, "%s", msg)
	p.set(rstatus.TypeReleased, metav1.ConditionFalse, rstatus.ReasonForbidden, msg)
	p.set(rstatus.TypeStalled, metav1.ConditionFalse, rstatus.ReasonForbidden, "")
	p.setState("Failed")
	return p.fail(rstatus.ReasonForbidden, errors.New(msg))
}

// fail records a transient failure: the pass is retried with back-off.
func (p *pass) fail(reason string, err error) error {
	p.set(rstatus.TypeReady, metav1.ConditionFalse, reason, err.Error())
	p.set(rstatus.TypeReconciling, metav1.ConditionTrue, reason, err.Error())
	return err
}

func (p *pass) setState(s string) {
	p.r.recordState(p.key, s)
}

// persist writes the status with one merge patch, and only when something changed.
func (p *pass) persist(ctx context.Context) error {
	st, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&p.st)
	if err != nil {
		return err
	}
	cur, _, _ := unstructured.NestedMap(p.obj.Object, "status")
	if cur == nil {
		cur = map[string]any{}
	}
	for _, k := range []string{"conditions", "observedGeneration", "release"} {
		if v, ok := st[k]; ok {
			cur[k] = v
		} else {
			delete(cur, k)
		}
	}
	p.obj.Object["status"] = cur
	// Most passes change nothing: compare before marshalling anything.
	if reflect.DeepEqual(p.origStatus, any(cur)) {
		return nil
	}
	before := &unstructured.Unstructured{Object: map[string]any{"status": p.origStatus}}
	data, err := client.MergeFrom(before).Data(&unstructured.Unstructured{Object: map[string]any{"status": cur}})
	if err != nil {
		return err
	}
	if string(data) == "{}" {
		return nil
	}
	patch := client.RawPatch(types.MergePatchType, data)
	statusWrites.WithLabelValues(p.r.gvkLabel()).Inc()
	if err := p.r.opts.Client.Status().Patch(ctx, p.obj, patch); err != nil {
		return client.IgnoreNotFound(err)
	}
	return nil
}

// run is the state machine of one pass. A nil error with a Result means the pass completed.
func (p *pass) run(ctx context.Context) (reconcile.Result, error) {
	r := p.r
	log := logr.FromContextOrDiscard(ctx)
	p.log = log

	if p.obj.GetAnnotations()[AnnotationPaused] == "true" {
		p.set(rstatus.TypePaused, metav1.ConditionTrue, rstatus.ReasonPaused,
			AnnotationPaused+` is "true": no release actions until it is removed`)
		p.set(rstatus.TypeReconciling, metav1.ConditionFalse, rstatus.ReasonPaused, "paused")
		p.setState("Paused")
		return reconcile.Result{}, nil
	}
	if c := p.cond(rstatus.TypePaused); c != nil && c.Status == metav1.ConditionTrue {
		p.set(rstatus.TypePaused, metav1.ConditionFalse, rstatus.ReasonResumed, AnnotationPaused+" removed")
		p.event(corev1.EventTypeNormal, rstatus.ReasonResumed, "Resume", "reconciling again")
	}

	// Chart: always the last good snapshot; a broken chart on disk is shown, never used.
	cs, _ := r.opts.Charts.Get(r.opts.Watch.ChartPath())
	p.snap = cs.Current
	if cs.Err != nil {
		prev := p.cond(rstatus.TypeChartReady)
		p.set(rstatus.TypeChartReady, metav1.ConditionFalse, rstatus.ReasonChartInvalid,
			fmt.Sprintf("%v (still using the last good version, digest %s)", cs.Err, p.snap.ShortDigest()))
		if prev == nil || prev.Status != metav1.ConditionFalse {
			p.event(corev1.EventTypeWarning, rstatus.ReasonChartInvalid, "LoadChart", "%v", cs.Err)
		}
	} else {
		p.set(rstatus.TypeChartReady, metav1.ConditionTrue, rstatus.ReasonChartLoaded,
			fmt.Sprintf("chart %s-%s, digest %s", p.snap.Chart.Name(), p.snap.Chart.Metadata.Version, p.snap.ShortDigest()))
	}

	var err error
	if p.relName, err = r.releaseName(p.obj); err != nil {
		return reconcile.Result{}, p.stall(rstatus.ReasonValuesInvalid, err.Error())
	}
	overridden, err := p.buildValues()
	if err != nil {
		return reconcile.Result{}, p.stall(rstatus.ReasonValuesInvalid, err.Error())
	}

	// Pre-release hooks may hold the release or change the values.
	var held *hook.Decision
	for _, h := range r.opts.Hooks.PreReleaseHooks(r.gvk) {
		start := r.opts.Clock.Now()
		d, err := h.PreRelease(ctx, p.obj, p.values)
		observeHook(r.gvkLabel(), "pre", r.opts.Clock.Since(start), err)
		if err != nil {
			return reconcile.Result{}, p.hookFailed("pre-release", err)
		}
		if d.Hold {
			held = &d
			break
		}
	}

	vd, err := helm.ValuesDigest(p.values)
	if err != nil {
		return reconcile.Result{}, p.stall(rstatus.ReasonValuesInvalid, err.Error())
	}
	p.want = helm.Desired{OwnerUID: string(p.obj.GetUID()), ChartDigest: helm.ShortDigest(p.snap.Digest), ValuesDigest: vd,
		Generation: p.gen}
	if p.st.Release != nil && p.st.Release.Applied != nil {
		p.want.Applied = &helm.Applied{Generation: p.st.Release.Applied.Generation, ChartDigest: p.st.Release.Applied.ChartDigest}
	}

	var rel *release.Release // decoded newest revision, when this pass needed it
	var head *helm.Head
	if held != nil {
		reason := rstatus.ReasonHeld
		if held.Reason != "" {
			reason = held.Reason // the hook's own word for it ("Scheduled", "Done")
		}
		p.set(rstatus.TypeReleased, condStatusOf(p.cond(rstatus.TypeReleased)), reason, held.Message)
		if held.RequeueAfter > 0 {
			p.requeueIn(held.RequeueAfter)
		}
		if head, rel, err = p.readRelease(ctx); err != nil {
			return reconcile.Result{}, p.fail(rstatus.ReasonReconcileError, err)
		}
		p.setState("Held")
		if head == nil || head.OwnerUID != p.want.OwnerUID {
			p.set(rstatus.TypeReady, metav1.ConditionFalse, reason, held.Message)
			p.set(rstatus.TypeReconciling, metav1.ConditionTrue, reason, held.Message)
			p.set(rstatus.TypeStalled, metav1.ConditionFalse, reason, held.Message)
			head, rel = nil, nil
		}
	} else {
		if err := p.requestedRollback(ctx); err != nil {
			return reconcile.Result{}, err
		}
		head, rel, err = p.ensureRelease(ctx, overridden)
		if errors.Is(err, errWaiting) {
			return reconcile.Result{RequeueAfter: p.requeue}, nil
		}
		if err != nil {
			return reconcile.Result{}, err
		}
		log.V(1).Info("release in sync", "release", p.relName, "revision", head.Revision)
	}

	if head != nil {
		if err := p.loadObjects(ctx, head, rel); err != nil {
			reason := rstatus.ReasonReconcileError
			if ae := (*AccessError)(nil); errors.As(err, &ae) {
				reason = rstatus.ReasonForbidden
			}
			return reconcile.Result{}, p.fail(reason, err)
		}
		switch {
		case held != nil || r.opts.Dependents == nil:
		case p.applied:
			// Nothing to correct right after Helm applied it. A change made meanwhile keeps its
			// mark for the pass its event causes.
			r.markVerified(p.key, p.obj.GetUID())
		case r.takeDrift(p.key, p.obj.GetUID()):
			if err := p.correctDrift(ctx, head); err != nil {
				return reconcile.Result{}, p.fail(rstatus.ReasonReconcileError, err)
			}
		}
		if err := p.readiness(ctx, held != nil); err != nil {
			return reconcile.Result{}, p.fail(rstatus.ReasonReconcileError, err)
		}
	}

	var hrel *hook.Release
	if head != nil {
		hrel = &hook.Release{Name: p.relName, Namespace: p.key.Namespace, Revision: head.Revision, Status: head.Status, Objects: p.objects}
	}
	for _, h := range r.opts.Hooks.PostReleaseHooks(r.gvk) {
		start := r.opts.Clock.Now()
		d, err := h.PostRelease(ctx, p.obj, hrel, r.reader())
		observeHook(r.gvkLabel(), "post", r.opts.Clock.Since(start), err)
		if err != nil {
			return reconcile.Result{}, p.hookFailed("post-release", err)
		}
		p.requeueIn(d)
	}

	p.st.ObservedGeneration = p.gen
	p.requeueIn(jitter(r.reconcilePeriod()))
	return reconcile.Result{RequeueAfter: p.requeue}, nil
}

func condStatusOf(c *metav1.Condition) metav1.ConditionStatus {
	if c == nil {
		return metav1.ConditionFalse
	}
	return c.Status
}

func (p *pass) requeueIn(d time.Duration) {
	if d > 0 && (p.requeue == 0 || d < p.requeue) {
		p.requeue = d
	}
}

func (p *pass) hookFailed(which string, err error) error {
	msg := fmt.Sprintf("%s hook: %v", which, err)
	p.set(rstatus.TypeReady, metav1.ConditionFalse, rstatus.ReasonHookFailed, msg)
	p.set(rstatus.TypeReconciling, metav1.ConditionTrue, rstatus.ReasonHookFailed, msg)
	p.event(corev1.EventTypeWarning, rstatus.ReasonHookFailed, "Hook", "%s", msg)
	return errors.New(msg)
}

// buildValues: the CR's spec, then the watch's overrides on top. It returns the override keys
// that were applied.
func (p *pass) buildValues() ([]string, error) {
	values, overridden, err := Values(p.r.opts.Watch, p.obj)
	p.values = values
	return overridden, err
}

// cachedHead reads the newest revision's Secret labels from the manager's cache (which holds
// only the metadata of release Secrets carrying rudder's owner label): no API call, no decoding.
func (p *pass) cachedHead(ctx context.Context) *helm.Head {
	list := &metav1.PartialObjectMetadataList{}
	list.SetGroupVersionKind(secretGVK.GroupVersion().WithKind("SecretList"))
	// Read-only use of the labels: no copies.
	if err := p.r.opts.Client.List(ctx, list, client.InNamespace(p.key.Namespace),
		client.MatchingFields{ReleaseSecretIndex: p.relName}, client.UnsafeDisableDeepCopy); err != nil {
		return nil
	}
	var best *helm.Head
	for i := range list.Items {
		if h := helm.HeadOfLabels(list.Items[i].Labels); h != nil && (best == nil || h.Revision > best.Revision) {
			best = h
		}
	}
	return best
}

// readRelease returns the newest revision, from the cache when it is ours, else from storage.
func (p *pass) readRelease(ctx context.Context) (*helm.Head, *release.Release, error) {
	if h := p.cachedHead(ctx); h != nil && h.OwnerUID == p.want.OwnerUID {
		return h, nil, nil
	}
	rel, err := p.r.opts.Helm.Last(p.scope, p.relName)
	if err != nil {
		return nil, nil, fmt.Errorf("reading release %s: %w", p.relName, err)
	}
	return helm.HeadOf(rel), rel, nil
}

// stuck reports whether the desired (chart, values) already failed: not retried until one of
// them changes.
func (p *pass) stuck() bool {
	f := p.st.Release
	if f != nil && f.Failed != nil && f.Failed.ChartDigest == p.want.ChartDigest && f.Failed.ValuesDigest == p.want.ValuesDigest {
		return true
	}
	// The pass that failed may have written its status after this pass read the CR from the
	// cache (events from the failed attempt's own objects wake passes that fast).
	m, ok := p.r.failureOf(p.key)
	if !ok || m.uid != p.obj.GetUID() || m.failed.ChartDigest != p.want.ChartDigest || m.failed.ValuesDigest != p.want.ValuesDigest {
		return false
	}
	if p.st.Release == nil {
		p.st.Release = &rstatus.Release{Name: p.relName}
	}
	p.st.Release.Failed = &m.failed
	if c := p.cond(rstatus.TypeReleased); c == nil || c.Status != metav1.ConditionFalse {
		p.set(rstatus.TypeReleased, metav1.ConditionFalse, m.reason, m.failed.Message)
	}
	return true
}

func (p *pass) stuckError() error {
	reason := rstatus.ReasonUpgradeFailed
	if c := p.cond(rstatus.TypeReleased); c != nil && c.Status == metav1.ConditionFalse {
		switch c.Reason {
		case rstatus.ReasonInstallFailed, rstatus.ReasonChartInvalid, rstatus.ReasonRolledBack, rstatus.ReasonRollbackFailed,
			rstatus.ReasonForbidden, rstatus.ReasonUnlocked, rstatus.ReasonValuesInvalid:
			reason = c.Reason
		}
	}
	return p.stall(reason, fmt.Sprintf("chart %s with values %s failed and is not retried until the spec or the chart changes: %s",
		helm.DisplayDigest(p.want.ChartDigest), helm.DisplayDigest(p.want.ValuesDigest), p.st.Release.Failed.Message))
}

// foreignPendingGrace is how long a pending revision that rudder did not start is left to the
// operation that may still be running it (a person's helm rollback or upgrade, whose --timeout
// defaults to this) before rudder unlocks it as dead. rudder's own pending revisions are
// unlocked at once: rudder runs one operation per release, so one it finds was started by a
// process that is gone.
const foreignPendingGrace = 5 * time.Minute

// errWaiting ends a pass that waits for something with a RequeueAfter and no error.
var errWaiting = errors.New("waiting")

// foreignOperation reports (and says on the CR) whether the pending newest revision belongs to
// an operation rudder did not start that may still be running.
func (p *pass) foreignOperation(rel *release.Release) bool {
	if rel.Info == nil || helm.HeadOf(rel).MadeByRudder() || strings.HasPrefix(rel.Info.Description, "rudder ") {
		// rudder's own: an install or upgrade carries its revision label, a rollback rudder
		// made its description.
		return false
	}
	age := p.r.opts.Clock.Since(rel.Info.LastDeployed.Time)
	if age >= foreignPendingGrace {
		return false
	}
	msg := fmt.Sprintf("revision %d is %s by an operation rudder did not start (%q); waiting up to %s from its start before unlocking it",
		rel.Version, rel.Info.Status, rel.Info.Description, foreignPendingGrace)
	p.set(rstatus.TypeReleased, metav1.ConditionFalse, rstatus.ReasonPendingOperation, msg)
	p.set(rstatus.TypeReady, metav1.ConditionFalse, rstatus.ReasonPendingOperation, msg)
	p.set(rstatus.TypeReconciling, metav1.ConditionTrue, rstatus.ReasonPendingOperation, msg)
	p.setState("Locked")
	p.requeueIn(jitter(min(foreignPendingGrace-age, 30*time.Second)))
	return true
}

// ensureRelease brings the release to the desired state and returns its newest revision.
func (p *pass) ensureRelease(ctx context.Context, overridden []string) (*helm.Head, *release.Release, error) {
	r := p.r
	// Fast path: the cache says the release is deployed from exactly what is desired.
	var h *helm.Head
	if !p.rolledBack {
		h = p.cachedHead(ctx)
	}
	if h != nil && p.st.Release != nil && h.Revision < p.st.Release.Revision {
		// The cache is behind this CR's own status (a revision a pass just made): decide
		// from storage.
		h = nil
	}
	switch helm.DetermineState(h, p.want) {
	case helm.StateInSync:
		p.inSync(h)
		return h, nil, nil
	case helm.StateRolledBack:
		return h, nil, p.keepRollback(ctx, h, nil)
	}
	if h == nil && p.st.Release == nil && !p.rolledBack {
		// A new CR: neither the cache nor the status knows a release. Helm's install reads
		// storage for the name itself before it writes anything, so nothing is read here. If the
		// name is taken after all (the cache is behind, or the release is not rudder's), storage
		// is read below and decides.
		if p.stuck() {
			return nil, nil, p.stuckError()
		}
		head, rel, err := p.install(ctx, overridden)
		if !errors.Is(err, helm.ErrNameInUse) {
			return head, rel, err
		}
		p.log.V(1).Info("release name in use although the cache has no revision; reading storage", "release", p.relName)
	}
	rel, err := r.opts.Helm.Last(p.scope, p.relName)
	if err != nil {
		return nil, nil, p.fail(rstatus.ReasonReconcileError, fmt.Errorf("reading release %s: %w", p.relName, err))
	}
	state := helm.DetermineState(helm.HeadOf(rel), p.want)
	if state == helm.StateLocked && p.foreignOperation(rel) {
		return nil, nil, errWaiting
	}
	if state == helm.StateLocked {
		prev := rel.Info.Status
		if err := r.opts.Helm.Unlock(p.scope, rel); err != nil {
			return nil, nil, p.fail(rstatus.ReasonReconcileError, fmt.Errorf("unlocking release %s: %w", p.relName, err))
		}
		releaseActions.WithLabelValues(r.gvkLabel(), "unlock", "ok").Inc()
		msg := fmt.Sprintf("revision %d was left %s by an operation that is gone; marked failed", rel.Version, prev)
		p.event(corev1.EventTypeWarning, rstatus.ReasonUnlocked, "Unlock", "%s", msg)
		p.set(rstatus.TypeReleased, metav1.ConditionFalse, rstatus.ReasonUnlocked, msg)
		state = helm.StateFailed
	}
	switch state {
	case helm.StateInSync:
		p.inSync(helm.HeadOf(rel))
		return helm.HeadOf(rel), rel, nil
	case helm.StateRolledBack:
		return helm.HeadOf(rel), rel, p.keepRollback(ctx, helm.HeadOf(rel), rel)
	case helm.StateConflict:
		return nil, nil, p.conflict(rel)
	case helm.StateAbsent:
		if p.stuck() {
			return nil, nil, p.stuckError()
		}
		head, rel, err := p.install(ctx, overridden)
		if errors.Is(err, helm.ErrNameInUse) {
			// Created since storage was read just now: decide again in a pass of its own.
			return nil, nil, p.fail(rstatus.ReasonReconcileError, err)
		}
		return head, rel, err
	case helm.StateUninstalled:
		// An uninstall that died (rudder's clean-up of a failed install, killed) or one that
		// kept its history: Helm installs over neither, so finish it first.
		if err := r.opts.Helm.Uninstall(p.scope, p.relName, "rudder: finishing an uninstall before installing again"); err != nil {
			return nil, nil, p.fail(rstatus.ReasonReconcileError, fmt.Errorf("finishing the uninstall of %s: %w", p.relName, err))
		}
		if p.stuck() {
			return nil, nil, p.stuckError()
		}
		return p.install(ctx, overridden)
	case helm.StateFailed:
		deployed, err := r.opts.Helm.LastDeployed(p.scope, p.relName, rel.Version)
		if err != nil {
			return nil, nil, p.fail(rstatus.ReasonReconcileError, err)
		}
		if deployed == nil {
			// Never deployed: a failed install. Clean it up before installing again.
			if err := r.opts.Helm.Uninstall(p.scope, p.relName, "rudder: removing failed install"); err != nil {
				return nil, nil, p.fail(rstatus.ReasonReconcileError, fmt.Errorf("removing failed install of %s: %w", p.relName, err))
			}
			if p.stuck() {
				return nil, nil, p.stuckError()
			}
			return p.install(ctx, overridden)
		}
		if p.stuck() {
			return nil, nil, p.stuckError()
		}
		return p.upgrade(ctx, overridden)
	default: // OutOfSync
		if p.stuck() {
			return nil, nil, p.stuckError()
		}
		return p.upgrade(ctx, overridden)
	}
}

func (p *pass) inSync(h *helm.Head) {
	p.setState("InSync")
	if p.st.Release == nil || p.st.Release.Name != p.relName || p.st.Release.Revision != h.Revision {
		chartName := ""
		if p.st.Release != nil && p.st.Release.Revision == h.Revision {
			chartName = p.st.Release.Chart
		}
		p.st.Release = &rstatus.Release{Name: p.relName, Revision: h.Revision, Chart: chartName,
			ChartDigest: h.ChartDigest, ValuesDigest: h.ValuesDigest, RollbackRequest: p.rollbackRequest()}
	}
	// Deployed from exactly what the spec and chart give now: what rudder would make is this.
	p.st.Release.RolledBackTo = h.RolledBackTo()
	if a := p.st.Release.Applied; a == nil || a.Generation != p.gen || a.ChartDigest != p.want.ChartDigest {
		p.st.Release.Applied = &rstatus.AppliedRelease{Revision: h.Revision, Generation: p.gen, ChartDigest: p.want.ChartDigest}
	}
	if p.st.Release.Chart == "" {
		p.st.Release.Chart = p.snap.Chart.Name() + "-" + p.snap.Chart.Metadata.Version
	}
	p.st.Release.Failed = nil
	p.r.forgetFailure(p.key)
	if c := p.cond(rstatus.TypeReleased); c == nil || c.Status != metav1.ConditionTrue || c.Reason == rstatus.ReasonManualRollback {
		p.set(rstatus.TypeReleased, metav1.ConditionTrue, rstatus.ReasonUpToDate,
			fmt.Sprintf("revision %d is deployed from the current spec and chart", h.Revision))
	}
	p.set(rstatus.TypeStalled, metav1.ConditionFalse, rstatus.ReasonUpToDate, "")
}

func (p *pass) request(action string, overridden []string) (*helm.Request, error) {
	ch, err := p.snap.Fresh()
	if err != nil {
		return nil, err
	}
	return NewRequest(p.r.opts.Watch, p.obj, p.scope, p.relName, ch, p.snap.Digest, p.values, p.want.ValuesDigest,
		Description(action, p.gen, ch, p.snap.Digest, p.want.ValuesDigest, overridden)), nil
}

// preflight runs the checks that need no cluster; their failure is permanent until a change.
// It runs once per pass, however many actions the pass tries.
func (p *pass) preflight(overridden []string) error {
	if p.preflighted {
		return nil
	}
	p.preflighted = true
	if err := ValidateValues(p.snap.Chart, p.values); err != nil {
		return p.stall(rstatus.ReasonValuesInvalid, "values do not match the chart's values.schema.json: "+err.Error())
	}
	if len(overridden) > 0 {
		p.event(corev1.EventTypeNormal, "OverrideApplied", "Render",
			"watches.yaml overrideValues set %s on top of the spec", strings.Join(overridden, ", "))
	}
	return nil
}

// conflict stalls the CR on a release of its name that another owner made.
func (p *pass) conflict(rel *release.Release) error {
	owner := rel.Labels[helm.LabelOwnerKind]
	if owner == "" {
		owner = "something other than rudder"
	} else {
		owner = fmt.Sprintf("another %s (uid %s)", owner, rel.Labels[helm.LabelOwnerUID])
	}
	return p.stall(rstatus.ReasonReleaseNameConflict, fmt.Sprintf(
		"release %q in namespace %s belongs to %s; rudder never takes over a release it did not make for this CR: rename one of them (watches.yaml releaseName) or remove that release",
		p.relName, p.key.Namespace, owner))
}

func (p *pass) install(ctx context.Context, overridden []string) (*helm.Head, *release.Release, error) {
	r := p.r
	if err := p.preflight(overridden); err != nil {
		return nil, nil, err
	}
	req, err := p.request("install", overridden)
	if err != nil {
		return nil, nil, p.fail(rstatus.ReasonReconcileError, err)
	}
	rel, err := r.opts.Helm.Install(ctx, req)
	if errors.Is(err, helm.ErrNameInUse) {
		// Nothing was written: not a failed install, and nothing of it to clean up.
		return nil, nil, err
	}
	if err != nil {
		releaseActions.WithLabelValues(r.gvkLabel(), "install", "failed").Inc()
		if isTransient(err) {
			return nil, nil, p.fail(rstatus.ReasonInstallFailed, fmt.Errorf("installing %s: %w", p.relName, err))
		}
		reason := rstatus.ReasonInstallFailed
		if isChartError(err) {
			reason = rstatus.ReasonChartInvalid
		}
		// A failed install leaves a failed revision (and maybe some objects): remove both — but
		// only a release this CR made. One that another owner created under the same name since
		// this pass looked (Helm then refuses the name) is left alone: that is a conflict.
		last, lerr := r.opts.Helm.Last(p.scope, p.relName)
		switch {
		case lerr != nil && helm.IsForbidden(err):
			// Refused as a whole (e.g. the tenant may not read its release storage either).
			err = fmt.Errorf("%w (and reading the release to clean up: %w)", err, lerr)
		case lerr != nil:
			return nil, nil, p.fail(rstatus.ReasonInstallFailed, fmt.Errorf("installing %s: %w (and reading the release to clean up: %w)", p.relName, err, lerr))
		case last != nil && last.Labels[helm.LabelOwnerUID] != p.want.OwnerUID:
			return nil, nil, p.conflict(last)
		case last != nil:
			if uerr := r.opts.Helm.Uninstall(p.scope, p.relName, "rudder: removing failed install"); uerr != nil {
				err = fmt.Errorf("%w (and removing the failed install: %w)", err, uerr)
			}
		}
		if helm.IsForbidden(err) {
			return nil, nil, p.forbidden("Install", fmt.Errorf("installing release %s: %w", p.relName, err))
		}
		p.recordFailure(reason, err)
		p.event(corev1.EventTypeWarning, reason, "Install", "installing release %s: %v", p.relName, err)
		return nil, nil, p.stall(reason, fmt.Sprintf("installing release %s: %v", p.relName, err))
	}
	releaseActions.WithLabelValues(r.gvkLabel(), "install", "ok").Inc()
	msg := fmt.Sprintf("installed revision %d of %s", rel.Version, req.Description)
	p.event(corev1.EventTypeNormal, rstatus.ReasonInstallSucceeded, "Install", "%s", msg)
	p.succeeded(rel, rstatus.ReasonInstallSucceeded, msg)
	return helm.HeadOf(rel), rel, nil
}

func (p *pass) upgrade(ctx context.Context, overridden []string) (*helm.Head, *release.Release, error) {
	r := p.r
	if err := p.preflight(overridden); err != nil {
		return nil, nil, err
	}
	req, err := p.request("upgrade", overridden)
	if err != nil {
		return nil, nil, p.fail(rstatus.ReasonReconcileError, err)
	}
	rel, err := r.opts.Helm.Upgrade(ctx, req)
	if err == nil {
		releaseActions.WithLabelValues(r.gvkLabel(), "upgrade", "ok").Inc()
		msg := fmt.Sprintf("upgraded to revision %d: %s", rel.Version, req.Description)
		p.event(corev1.EventTypeNormal, rstatus.ReasonUpgradeSucceeded, "Upgrade", "%s", msg)
		p.succeeded(rel, rstatus.ReasonUpgradeSucceeded, msg)
		return helm.HeadOf(rel), rel, nil
	}
	releaseActions.WithLabelValues(r.gvkLabel(), "upgrade", "failed").Inc()
	if isTransient(err) {
		return nil, nil, p.fail(rstatus.ReasonUpgradeFailed, fmt.Errorf("upgrading %s: %w", p.relName, err))
	}
	if isChartError(err) {
		// Refused before anything was applied: the release is untouched.
		p.recordFailure(rstatus.ReasonChartInvalid, err)
		p.event(corev1.EventTypeWarning, rstatus.ReasonChartInvalid, "Upgrade", "upgrading release %s: %v", p.relName, err)
		return nil, nil, p.stall(rstatus.ReasonChartInvalid, fmt.Sprintf("upgrading release %s: %v", p.relName, err))
	}
	forbidden := helm.IsForbidden(err)
	msg := fmt.Sprintf("upgrading release %s: %v", p.relName, err)
	if !forbidden {
		p.recordFailure(rstatus.ReasonUpgradeFailed, err)
		p.event(corev1.EventTypeWarning, rstatus.ReasonUpgradeFailed, "Upgrade", "%s", msg)
	}
	last, lerr := r.opts.Helm.Last(p.scope, p.relName)
	if lerr == nil && last != nil && last.Info != nil && last.Info.Status == release.StatusDeployed {
		// Helm refused before it recorded a revision (e.g. reading an object it would create
		// was forbidden): nothing changed, so there is nothing to roll back — and a retry must
		// not add a rollback revision each time.
		unchanged := fmt.Sprintf("%s; nothing was changed, the release stays at revision %d", msg, last.Version)
		if forbidden {
			return nil, nil, p.forbidden("Upgrade", errors.New(unchanged))
		}
		return nil, nil, p.stall(rstatus.ReasonUpgradeFailed, unchanged+"; not retried until the spec or the chart changes")
	}
	if !r.opts.Watch.RollsBack() {
		if forbidden {
			return nil, nil, p.forbidden("Upgrade", errors.New(msg+" (automatic rollback is off for this watch)"))
		}
		return nil, nil, p.stall(rstatus.ReasonUpgradeFailed, msg+" (automatic rollback is off for this watch)")
	}
	var deployed *release.Release
	if lerr == nil && last != nil {
		deployed, lerr = r.opts.Helm.LastDeployed(p.scope, p.relName, last.Version)
	}
	if lerr != nil || deployed == nil {
		return nil, nil, p.stall(rstatus.ReasonUpgradeFailed, msg+"; no deployed revision to roll back to")
	}
	rbDesc := fmt.Sprintf("rudder rollback to revision %d: the upgrade to generation %d failed", deployed.Version, p.gen)
	if rerr := r.opts.Helm.Rollback(p.scope, p.relName, deployed.Version, r.opts.Watch.History(), rbDesc); rerr != nil {
		releaseActions.WithLabelValues(r.gvkLabel(), "rollback", "failed").Inc()
		p.event(corev1.EventTypeWarning, rstatus.ReasonRollbackFailed, "Rollback", "rolling back %s to revision %d: %v", p.relName, deployed.Version, rerr)
		p.set(rstatus.TypeReleased, metav1.ConditionFalse, rstatus.ReasonRollbackFailed, fmt.Sprintf("%s; rollback to revision %d failed: %v", msg, deployed.Version, rerr))
		return nil, nil, p.fail(rstatus.ReasonRollbackFailed, rerr)
	}
	releaseActions.WithLabelValues(r.gvkLabel(), "rollback", "ok").Inc()
	now, err := r.opts.Helm.Last(p.scope, p.relName)
	if err != nil || now == nil {
		return nil, nil, p.fail(rstatus.ReasonReconcileError, fmt.Errorf("reading release after rollback: %w", err))
	}
	if forbidden {
		p.st.Release.Revision = now.Version
		return nil, nil, p.forbidden("Upgrade", fmt.Errorf("%s; rolled back to revision %d (now revision %d)", msg, deployed.Version, now.Version))
	}
	rb := fmt.Sprintf("%s; rolled back to revision %d (now revision %d); not retried until the spec or the chart changes", msg, deployed.Version, now.Version)
	p.event(corev1.EventTypeNormal, rstatus.ReasonRolledBack, "Rollback", "%s", rb)
	p.st.Release.Revision = now.Version
	p.st.Release.RolledBackTo = deployed.Version
	p.st.Release.Chart = now.Chart.Name() + "-" + now.Chart.Metadata.Version
	p.st.Release.ChartDigest = now.Labels[helm.LabelChartDigest]
	p.st.Release.ValuesDigest = now.Labels[helm.LabelValuesDigest]
	p.set(rstatus.TypeStalled, metav1.ConditionTrue, rstatus.ReasonUpgradeFailed, rb)
	p.set(rstatus.TypeReleased, metav1.ConditionFalse, rstatus.ReasonRolledBack, rb)
	p.set(rstatus.TypeReconciling, metav1.ConditionFalse, rstatus.ReasonUpgradeFailed, rb)
	p.set(rstatus.TypeReady, metav1.ConditionFalse, rstatus.ReasonUpgradeFailed, rb)
	p.st.ObservedGeneration = p.gen
	p.setState("Stalled")
	return nil, nil, fmt.Errorf("%w: %s", errStalled, rb)
}

// recordFailure holds the desired (chart, values) back after it failed: in
// status.release.failed, and in memory until the cache shows that status.
func (p *pass) recordFailure(reason string, err error) {
	if p.st.Release == nil {
		p.st.Release = &rstatus.Release{Name: p.relName}
	}
	p.st.Release.Failed = &rstatus.FailedRelease{ChartDigest: p.want.ChartDigest, ValuesDigest: p.want.ValuesDigest, Message: truncate(err.Error(), 1000)}
	p.r.rememberFailure(p.key, failure{uid: p.obj.GetUID(), reason: reason, failed: *p.st.Release.Failed})
}

func (p *pass) succeeded(rel *release.Release, reason, msg string) {
	p.applied = true
	p.r.forgetFailure(p.key)
	p.st.Release = &rstatus.Release{
		Name: p.relName, Revision: rel.Version, Chart: rel.Chart.Name() + "-" + rel.Chart.Metadata.Version,
		ChartDigest: p.want.ChartDigest, ValuesDigest: p.want.ValuesDigest,
		Applied:         &rstatus.AppliedRelease{Revision: rel.Version, Generation: p.gen, ChartDigest: p.want.ChartDigest},
		RollbackRequest: p.rollbackRequest(),
	}
	p.set(rstatus.TypeReleased, metav1.ConditionTrue, reason, msg)
	p.set(rstatus.TypeStalled, metav1.ConditionFalse, reason, "")
	p.setState("InSync")
}

// loadObjects gets the parsed manifest of the head revision and makes sure every kind in it
// has a dependent watch.
func (p *pass) loadObjects(ctx context.Context, head *helm.Head, rel *release.Release) error {
	p.revision = head.Revision
	if objs, ok := p.r.cachedManifest(p.key, head.Revision); ok {
		p.objects = objs
		return nil
	}
	if rel == nil || rel.Version != head.Revision {
		var err error
		if rel, err = p.r.opts.Helm.Last(p.scope, p.relName); err != nil {
			return err
		}
		if rel == nil {
			return fmt.Errorf("release %s disappeared", p.relName)
		}
	}
	objs, err := p.r.manifestObjects(p.key, rel)
	if err != nil {
		return err
	}
	p.objects = objs
	for _, o := range objs {
		if err := p.r.ensureWatch(ctx, o.GroupVersionKind()); err != nil {
			return err
		}
	}
	return nil
}

func (p *pass) correctDrift(ctx context.Context, head *helm.Head) error {
	// The same confinement as every action: a release made before the watch became stricter
	// is not restored where it may no longer act.
	if err := p.scope.CheckObjects(p.r.opts.Client.RESTMapper(), p.objects); err != nil {
		p.r.markDirty(p.key) // every pass says so, not only the first after the change
		return fmt.Errorf("not restoring revision %d: %w", head.Revision, err)
	}
	w, err := p.r.opts.Helm.Writer(p.scope)
	if err != nil {
		return err
	}
	restored, err := helm.Reapply(ctx, p.objects, p.r.reader(), w)
	if err != nil {
		p.r.markDirty(p.key) // the retry must check again
	}
	if len(restored) > 0 {
		driftCorrections.WithLabelValues(p.r.gvkLabel()).Add(float64(len(restored)))
		msg := fmt.Sprintf("restored from revision %d without a new revision: %s", head.Revision, strings.Join(restored, ", "))
		p.event(corev1.EventTypeNormal, rstatus.ReasonDriftCorrected, "CorrectDrift", "%s", msg)
	}
	return err
}

// readiness computes Ready/Reconciling/Stalled from the live objects with kstatus.
// A held release (a hook said "not now") is reported as it is; nothing would restore a missing
// object, so none is waited for.
func (p *pass) readiness(ctx context.Context, held bool) error {
	if c := p.cond(rstatus.TypeStalled); c != nil && c.Status == metav1.ConditionTrue {
		return nil
	}
	var waiting, failed []string
	for _, want := range p.objects {
		live := &unstructured.Unstructured{}
		live.SetGroupVersionKind(want.GroupVersionKind())
		// kstatus only reads the object: the cache's copy is enough.
		err := p.r.reader().Get(ctx, client.ObjectKeyFromObject(want), live, client.UnsafeDisableDeepCopy)
		if apierrors.IsNotFound(err) {
			// Deleted (its event may not have come yet) or not in the cache yet: look again, and
			// let that pass restore it if it is really gone. Right after Helm created it, the
			// cache is simply behind: its create event brings the next pass.
			waiting = append(waiting, helm.Describe(want)+": not found")
			if !held {
				if !p.applied {
					p.r.markDirty(p.key)
				}
				p.requeueIn(jitter(notReadyRequeue))
			}
			continue
		}
		if err != nil {
			return err
		}
		res, err := status.Compute(live)
		if err != nil {
			return err
		}
		switch res.Status {
		case status.CurrentStatus:
		case status.FailedStatus:
			failed = append(failed, helm.Describe(want)+": "+res.Message)
		default:
			waiting = append(waiting, helm.Describe(want)+": "+res.Message)
		}
	}
	switch {
	case len(failed) > 0:
		msg := strings.Join(failed, "; ")
		p.set(rstatus.TypeReady, metav1.ConditionFalse, rstatus.ReasonObjectFailed, msg)
		p.set(rstatus.TypeReconciling, metav1.ConditionFalse, rstatus.ReasonObjectFailed, msg)
		p.set(rstatus.TypeStalled, metav1.ConditionTrue, rstatus.ReasonObjectFailed, msg)
	case len(waiting) > 0:
		msg := "waiting for " + strings.Join(waiting, "; ")
		p.set(rstatus.TypeReady, metav1.ConditionFalse, rstatus.ReasonProgressing, msg)
		p.set(rstatus.TypeReconciling, metav1.ConditionTrue, rstatus.ReasonProgressing, msg)
		if p.r.opts.Dependents == nil {
			p.requeueIn(jitter(notReadyRequeue))
		}
	default:
		msg := fmt.Sprintf("revision %d: %d objects ready", p.revision, len(p.objects))
		p.set(rstatus.TypeReady, metav1.ConditionTrue, rstatus.ReasonObjectsReady, msg)
		p.set(rstatus.TypeReconciling, metav1.ConditionFalse, rstatus.ReasonObjectsReady, msg)
	}
	return nil
}

// isChartError: the chart rendered objects outside its scope or of unknown kinds; nothing was
// applied.
func isChartError(err error) bool {
	var ce *helm.ConfinementError
	var ue *helm.UnknownKindError
	return errors.As(err, &ce) || errors.As(err, &ue)
}

// isTransient: errors worth retrying as they are (the API server was briefly unreachable or
// overloaded), as opposed to what the chart and values caused.
func isTransient(err error) bool {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return true
	}
	var ne net.Error
	if errors.As(err, &ne) {
		return true
	}
	return apierrors.IsServerTimeout(err) || apierrors.IsTimeout(err) || apierrors.IsTooManyRequests(err) ||
		apierrors.IsServiceUnavailable(err) || apierrors.IsInternalError(err) || apierrors.IsConflict(err)
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n-3] + "..."
}
