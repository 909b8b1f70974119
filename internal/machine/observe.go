package machine

import (
	"context"
	"errors"
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	rstatus "github.com/rudder-operator/rudder/api/status"
	"github.com/rudder-operator/rudder/internal/chartsource"
	"github.com/rudder-operator/rudder/internal/helm"
	"github.com/rudder-operator/rudder/internal/hook"
	"github.com/rudder-operator/rudder/internal/plan"
	"github.com/rudder-operator/rudder/internal/records"
	"github.com/rudder-operator/rudder/internal/release"
	"github.com/rudder-operator/rudder/internal/watches"
)

// observation is what observe found of the CR and its release: everything the pass decides
// and acts from, read once. Nothing changes it once observe returns it; the release as each
// action leaves it is a value of its own (observed), read by the observer.
type observation struct {
	snap     *chartsource.Snapshot
	chartErr error // the chart on disk fails to load; snap is the last good version
	// chartDigest is what the release is made from: snap's digest with the watch's layers
	// (watches.Watch.ChartDigest), or the chart a rollout keeps; want.ChartDigest is its label
	// form.
	chartDigest string
	relName     string
	values      map[string]any
	overridden  []string // watches.yaml overrideValues keys applied on top of the spec
	// want is what the CR asks for; what rudder's newest own revision was made from
	// (Desired.Applied) is each read's (observer.classify).
	want records.Desired
	held *hook.Decision // a pre-release hook said "not now"
	// waitsFor says which CRs the CR depends on are not ready, and why ("": none): no install
	// or upgrade is made until they are.
	waitsFor string
	// pin is where the watch's rollouts leave the CR (see rollout.go).
	pin pin
	// release is the release as the pass found it.
	release observed
	// facts are the release's facts as the pass found them (see facts.go), failureMessage the
	// message of the failure among them that Memory keeps for a release without a record
	// ("": none, or the release has a record: no label holds a message), and heldBack the
	// failure among them that holds want back (nil: none).
	facts          records.Facts
	failureMessage string
	heldBack       *failure
	// tested is the run of the newest revision's tests its record holds and the status does
	// not report (nil: none, or the pass does not act).
	tested *testRecord
	// rollbackTarget is the revision a due rudder.dev/rollback-to value asks for (nil: none,
	// or the value names no revision of the history).
	rollbackTarget *records.Head
}

// observer is the step of a pass that reads: the chart, the values and the release once, at
// the start (observe), and the release again as each action leaves it (readRelease, closer).
// No other step reads the release's storage or its records' cache, but for the objects of the
// revision a pass ends on (settler.loadObjects): an action holds no reader (env.helm is
// acting), and returns what it made.
type observer struct {
	sub *subject
	// obs is the observation it fills in observe and no one changes after, whose release
	// and desired state (relName, want) its later reads are of.
	obs *observation
}

// observe fills ob.obs with what the pass acts on. It returns an outcome when the pass ends
// here: the CR is paused, its values do not render, or a pre-release hook failed.
func (ob *observer) observe(ctx context.Context) *outcome {
	obs := ob.obs
	out := ob.read(ctx, obs)
	obs.facts, obs.failureMessage = factsOf(ob.sub, obs.want.OwnerUID, obs.release.head)
	obs.heldBack = heldBackFailure(obs.facts, obs.failureMessage, obs.want, ob.sub.read.Release)
	if out != nil {
		return out
	}
	obs.tested = testedFromRecord(ctx, ob.sub, obs.relName, obs.release)
	if v, due := requestDue(ob.sub, AnnotationRollbackTo, obs.facts.RollbackTo); due {
		var err error
		if obs.rollbackTarget, err = ob.rollbackTarget(ctx, v); err != nil {
			return retried(rstatus.ReasonReconcileError, err)
		}
	}
	return nil
}

// read fills obs with the chart, the values, the hooks' word, the rollout's pin and the
// release, in that order; it returns the outcome of a pass that ends on one of them.
func (ob *observer) read(ctx context.Context, obs *observation) *outcome {
	sub, w := ob.sub, ob.sub.w
	if sub.obj.GetAnnotations()[AnnotationPaused] == "true" {
		return &outcome{phase: phasePaused}
	}
	// Chart: always the last good snapshot; a broken chart on disk is reported, never used.
	cs, _ := w.Charts.Get(w.Watch.ChartPath())
	obs.snap, obs.chartErr = cs.Current, cs.Err
	if obs.snap == nil {
		// Its load is retried with every change on disk (and each rescan), which wakes the CR.
		return stalled(rstatus.ReasonChartInvalid, fmt.Sprintf("the watch's chart has not loaded, so nothing is released: %v", cs.Err))
	}
	var err error
	if obs.relName, err = w.Watch.ReleaseNameOf(sub.obj); err != nil {
		return stalled(rstatus.ReasonValuesInvalid, err.Error())
	}
	base, out := ob.valuesFrom(ctx)
	if out != nil {
		return out
	}
	if obs.values, obs.overridden, err = w.Watch.Values(sub.obj, base); err != nil {
		return stalled(rstatus.ReasonValuesInvalid, err.Error())
	}
	if obs.held, out = ob.preReleaseHooks(ctx, obs.values); out != nil {
		return out
	}
	if obs.waitsFor, out = ob.dependencies(ctx); out != nil {
		return out
	}
	vd, err := records.ValuesDigest(obs.values)
	if err != nil {
		return stalled(rstatus.ReasonValuesInvalid, err.Error())
	}
	obs.chartDigest = w.Watch.ChartDigest(obs.snap.Digest)
	obs.want = records.Desired{OwnerUID: string(sub.obj.GetUID()), ChartDigest: records.LabelDigest(obs.chartDigest), ValuesDigest: vd,
		Generation: sub.gen}
	if obs.pin, err = rolloutPin(ctx, sub, obs.relName, obs.want); err != nil {
		return retried(rstatus.ReasonReconcileError, err)
	}
	if obs.pin.digest != "" {
		// A rollout keeps the CR on its own release's chart (see rollout.go).
		obs.chartDigest, obs.want.ChartDigest = obs.pin.digest, obs.pin.digest
	}
	if obs.release, err = ob.readRelease(ctx, false); err != nil {
		return retried(rstatus.ReasonReconcileError, err)
	}
	return nil
}

// valuesFrom reads what the watch's valuesFrom sources hold for the CR, merged, as the
// release's identity; it returns an outcome when the pass ends here: a source that is missing
// (Stalled until it appears: its watch wakes the CR) or that may not be read (retried).
func (ob *observer) valuesFrom(ctx context.Context) (map[string]any, *outcome) {
	sub, w := ob.sub, ob.sub.w
	if len(w.Watch.ValuesFrom) == 0 {
		return nil, nil
	}
	srcs, err := w.Watch.SourcesOf(sub.obj)
	if err != nil {
		return nil, stalled(rstatus.ReasonValuesInvalid, err.Error())
	}
	contents, err := w.Sources.Read(ctx, sub.scope, srcs, SourceUser{w.Queue, sub.key})
	var unclaimed *watches.UnclaimedError
	switch {
	case errors.As(err, &unclaimed):
		// Its watch wakes the CR when the source is annotated.
		return nil, stalled(rstatus.ReasonValuesFromUnclaimed, err.Error()+"; nothing is released until it does")
	case helm.IsForbidden(err):
		o := &outcome{}
		o.endOn(forbidden(sub.scope, "ReadValues", err.Error()))
		return nil, o
	case err != nil:
		return nil, retried(rstatus.ReasonReconcileError, err)
	}
	base, err := watches.MergeSources(srcs, contents)
	switch {
	case errors.Is(err, watches.ErrSourceMissing):
		return nil, stalled(rstatus.ReasonValuesFromMissing, err.Error()+"; nothing is released until it exists")
	case err != nil:
		return nil, stalled(rstatus.ReasonValuesInvalid, err.Error())
	}
	return base, nil
}

// preReleaseHooks runs the kind's pre-release hooks, which may change the values or hold the
// release (the first hold wins).
func (ob *observer) preReleaseHooks(ctx context.Context, values map[string]any) (*hook.Decision, *outcome) {
	w := ob.sub.w
	for _, h := range w.Hooks.PreReleaseHooks(w.gvk()) {
		start := w.Clock.Now()
		d, err := h.PreRelease(ctx, ob.sub.obj, values)
		observeHook(w.label(), "pre", w.Clock.Since(start), err)
		if err != nil {
			return nil, hookFailed(fmt.Sprintf("pre-release hook %T", h), err)
		}
		if d.Hold {
			return &d, nil
		}
	}
	return nil, nil
}

// readRelease reads the newest revision and classifies it. The manager's cache of release
// records (ReleaseHistory.Head) decides alone when no action follows and nothing more is read: in
// sync, or a rollback the status reports as kept already. Every other state is decided from
// storage, which the action then works on. A new CR reads nothing (see observed.assumed).
// fromStorage skips the cache (after this pass changed the release).
func (ob *observer) readRelease(ctx context.Context, fromStorage bool) (observed, error) {
	sub, w, name := ob.sub, ob.sub.w, ob.obs.relName
	if !fromStorage {
		h, err := w.Helm.History.Head(ctx, sub.scope, name)
		switch {
		case err != nil:
			sub.log.V(1).Info("reading the cached release head", "release", name, "error", err.Error())
		case h != nil:
			rel := ob.classify(h, nil)
			if rel.state == records.StateInSync || (rel.state == records.StateRolledBack && rollbackReported(sub, h)) {
				return rel, nil
			}
		case sub.takenOn:
			return observed{state: records.StateAbsent, assumed: true}, nil
		}
	}
	rel, err := w.Helm.History.Last(ctx, sub.scope, name)
	if err != nil {
		return observed{}, fmt.Errorf("reading release %s: %w", name, err)
	}
	h := records.HeadOf(rel)
	if h != nil && h.Facts == nil {
		// A rollback's copy of another revision's facts: the release's are the newest record's
		// that carries its own, as the cache of records shows them.
		if c, err := w.Helm.History.Head(ctx, sub.scope, name); err == nil && c != nil && c.Revision == h.Revision {
			h.Facts = c.Facts
		}
	}
	return ob.classify(h, rel), nil
}

// classify is the release with newest revision h (nil: none) and, when decoded, rel, with the
// state records.DetermineState gives it against what the CR wants and what rudder's newest own
// revision was made from, as the release's facts have it.
func (ob *observer) classify(h *records.Head, rel *release.Release) observed {
	want := ob.obs.want
	f, _ := factsOf(ob.sub, want.OwnerUID, h)
	want.Applied = f.Applied
	return observed{head: h, rel: rel, state: records.DetermineState(h, want)}
}

// closer reads what deciding on rel needs beyond its newest record, as what the pass met so
// far (o) calls for: in StateFailed, or after a failed test that is rolled back, the newest
// deployed revision before it; for a release of the CR's name that rudder did not make,
// whether its objects prove it is the CR's.
func (ob *observer) closer(ctx context.Context, rel observed, o *outcome) (observed, error) {
	sub, w, h, name := ob.sub, ob.sub.w, rel.head, ob.obs.relName
	if h == nil {
		return rel, nil
	}
	rel.deployed = 0
	p := w.Watch.Policies()
	failedTest := o.failed() == plan.Test && p.Tests().RollsBack()
	if rel.state != records.StateLocked && (rel.state == records.StateFailed || failedTest) {
		// Nothing was deployed before a first install (rudder keeps the record of a failed one
		// only when nothing was), so nothing is rolled back to; nor after an upgrade that is not.
		if !o.taken[plan.Install] && !h.Kept() && (o.failed() != plan.Upgrade || p.RollsBack()) {
			deployed, err := w.Helm.History.LastDeployed(ctx, sub.scope, name, h.Revision)
			if err != nil {
				return rel, fmt.Errorf("reading release %s: %w", name, err)
			}
			if deployed != nil {
				rel.deployed = deployed.Version
			}
		}
	}
	if rel.state == records.StateConflict && h.OwnerUID == "" && rel.proof == nil {
		proof, err := w.Helm.Owners.ProveForeign(ctx, sub.scope, name)
		if err != nil {
			return rel, fmt.Errorf("reading release %s, which rudder did not make, and its objects: %w", name, err)
		}
		rel.proof = proof
	}
	return rel, nil
}

// pinnedRelease is the release the pass takes the chart of when a rollout keeps the CR on its
// own release's chart (nil: the watch's chart).
func (ob *observer) pinnedRelease(ctx context.Context) (*release.Release, error) {
	obs := ob.obs
	if obs.pin.digest == "" {
		return nil, nil
	}
	if rel := obs.release.rel; rel != nil && helm.ChartOf(rel) != nil && records.HeadOf(rel).ChartDigest == obs.pin.digest {
		return rel, nil
	}
	rel, err := ob.sub.w.Helm.History.Last(ctx, ob.sub.scope, obs.relName)
	if err != nil {
		return nil, err
	}
	if rel == nil || helm.ChartOf(rel) == nil || records.HeadOf(rel).ChartDigest != obs.pin.digest {
		return nil, fmt.Errorf("release %s: its newest revision no longer holds chart %s", obs.relName, records.DisplayDigest(obs.pin.digest))
	}
	return rel, nil
}

// wholeObjects are the objects of rel's head revision as its manifest has them, for drift to be
// restored on, and whether the revision applies server-side: those the pass loaded (o), when
// they are whole, else the revision's record, read.
func (ob *observer) wholeObjects(ctx context.Context, o *outcome, rel observed) ([]*unstructured.Unstructured, bool, error) {
	if o.whole {
		return o.objects, o.serverSide, nil
	}
	if rel.head == nil {
		return nil, false, fmt.Errorf("release %s has no revision to restore", ob.obs.relName)
	}
	r := rel.rel
	if r == nil || r.Version != rel.head.Revision {
		var err error
		if r, err = ob.sub.w.Helm.History.Revision(ctx, ob.sub.scope, ob.obs.relName, rel.head.Revision); err != nil {
			return nil, false, err
		}
		if r == nil {
			return nil, false, fmt.Errorf("revision %d of release %s disappeared", rel.head.Revision, ob.obs.relName)
		}
	}
	objs, err := helm.ParseManifest(r.Manifest, r.Namespace, ob.sub.w.Mapper)
	return objs, r.ServerSideApply, err
}

// rollbackTarget is the revision a due rudder.dev/rollback-to value v asks for, as its record
// says (nil: v names none, or no revision of the history).
func (ob *observer) rollbackTarget(ctx context.Context, v string) (*records.Head, error) {
	to, err := RollbackRevision(v)
	if err != nil || to <= 0 {
		return nil, nil // a value that names no revision is the action's to refuse, not a read to retry
	}
	rel, err := ob.sub.w.Helm.History.Revision(ctx, ob.sub.scope, ob.obs.relName, to)
	if err != nil {
		return nil, fmt.Errorf("reading revision %d of %s: %w", to, ob.obs.relName, err)
	}
	return records.HeadOf(rel), nil
}

// newest is the release's newest revision as the cache of records shows it, with what this
// process wrote (nil: none).
func (ob *observer) newest(ctx context.Context) (*records.Head, error) {
	return ob.sub.w.Helm.History.Head(ctx, ob.sub.scope, ob.obs.relName)
}

// rollbackReported reports whether sub's status already describes revision h as a rollback
// that is kept (what it returned to, its chart). Another ending's description of it (in sync,
// as its copied labels said before they were found copied by a helm upgrade) is not.
func rollbackReported(sub *subject, h *records.Head) bool {
	st, c := sub.read.Release, sub.cond(rstatus.TypeReleased)
	return st != nil && st.Revision == h.Revision && st.Chart != "" && c != nil && c.Reason == rstatus.ReasonManualRollback
}
