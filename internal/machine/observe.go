package machine

import (
	"context"
	"errors"
	"fmt"

	rstatus "github.com/rudder-operator/rudder/api/status"
	"github.com/rudder-operator/rudder/internal/helm"
	"github.com/rudder-operator/rudder/internal/records"
	"github.com/rudder-operator/rudder/internal/watches"
)

// observe reads what the pass acts on. It returns an outcome when the pass ends here: the CR
// is paused, its values do not render, or a pre-release hook failed.
func (ob *observer) observe(ctx context.Context) *outcome {
	if ob.obj.GetAnnotations()[AnnotationPaused] == "true" {
		return &outcome{phase: phasePaused}
	}
	// Chart: always the last good snapshot; a broken chart on disk is reported, never used.
	cs, _ := ob.w.Charts.Get(ob.w.Watch.ChartPath())
	ob.snap, ob.chartErr = cs.Current, cs.Err
	if ob.snap == nil {
		// Its load is retried with every change on disk (and each rescan), which wakes the CR.
		return stalled(rstatus.ReasonChartInvalid, fmt.Sprintf("the watch's chart has not loaded, so nothing is released: %v", cs.Err))
	}

	var err error
	if ob.relName, err = ob.w.Watch.ReleaseNameOf(ob.obj); err != nil {
		return stalled(rstatus.ReasonValuesInvalid, err.Error())
	}
	base, out := ob.valuesFrom(ctx)
	if out != nil {
		return out
	}
	if ob.values, ob.overridden, err = ob.w.Watch.Values(ob.obj, base); err != nil {
		return stalled(rstatus.ReasonValuesInvalid, err.Error())
	}
	if out := ob.preReleaseHooks(ctx); out != nil {
		return out
	}
	vd, err := records.ValuesDigest(ob.values)
	if err != nil {
		return stalled(rstatus.ReasonValuesInvalid, err.Error())
	}
	ob.chartDigest = ob.w.Watch.ChartDigest(ob.snap.Digest)
	ob.want = records.Desired{OwnerUID: string(ob.obj.GetUID()), ChartDigest: records.LabelDigest(ob.chartDigest), ValuesDigest: vd,
		Generation: ob.gen}
	if ob.pin, err = ob.rolloutPin(ctx); err != nil {
		return retried(rstatus.ReasonReconcileError, err)
	}
	if ob.pin.digest != "" {
		// A rollout keeps the CR on its own release's chart (see rollout.go).
		ob.chartDigest, ob.want.ChartDigest = ob.pin.digest, ob.pin.digest
	}
	if ob.release, err = ob.observeRelease(ctx, false); err != nil {
		return retried(rstatus.ReasonReconcileError, err)
	}
	return nil
}

// valuesFrom reads what the watch's valuesFrom sources hold for the CR, merged, as the
// release's identity; it returns an outcome when the pass ends here: a source that is missing
// (Stalled until it appears: its watch wakes the CR) or that may not be read (retried).
func (ob *observer) valuesFrom(ctx context.Context) (map[string]any, *outcome) {
	if len(ob.w.Watch.ValuesFrom) == 0 {
		return nil, nil
	}
	srcs, err := ob.w.Watch.SourcesOf(ob.obj)
	if err != nil {
		return nil, stalled(rstatus.ReasonValuesInvalid, err.Error())
	}
	contents, err := ob.w.Sources.Read(ctx, ob.scope, srcs, SourceUser{ob.w.Queue, ob.key})
	var unclaimed *watches.UnclaimedError
	switch {
	case errors.As(err, &unclaimed):
		// Its watch wakes the CR when the source is annotated.
		return nil, stalled(rstatus.ReasonValuesFromUnclaimed, err.Error()+"; nothing is released until it does")
	case helm.IsForbidden(err):
		o := &outcome{}
		o.endOn(forbidden(ob.scope, "ReadValues", err.Error()))
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
func (ob *observer) preReleaseHooks(ctx context.Context) *outcome {
	w := ob.w
	for _, h := range w.Hooks.PreReleaseHooks(w.gvk()) {
		start := w.Clock.Now()
		d, err := h.PreRelease(ctx, ob.obj, ob.values)
		observeHook(w.label(), "pre", w.Clock.Since(start), err)
		if err != nil {
			return hookFailed(fmt.Sprintf("pre-release hook %T", h), err)
		}
		if d.Hold {
			ob.held = &d
			return nil
		}
	}
	return nil
}

// observeRelease reads the newest revision and decides what it needs. The manager's cache of
// release records (Releases.Head) decides alone when no action follows (in sync, or a rollback that is
// kept); every other state is decided from storage, which the action then works on. A new CR
// reads nothing (see observed.assumed). fromStorage skips the cache (after this pass changed
// the release).
func (ob *observation) observeRelease(ctx context.Context, fromStorage bool) (observed, error) {
	if !fromStorage {
		h, err := ob.w.Helm.Head(ctx, ob.scope, ob.relName)
		switch {
		case err != nil:
			ob.log.V(1).Info("reading the cached release head", "release", ob.relName, "error", err.Error())
		case h != nil:
			ob.want.Applied = ob.applied(h)
			if s := records.DetermineState(h, ob.want); s == records.StateInSync || s == records.StateRolledBack {
				return observed{head: h, state: s}, nil
			}
		case ob.takenOn:
			return observed{state: records.StateAbsent, assumed: true}, nil
		}
	}
	rel, err := ob.w.Helm.Last(ctx, ob.scope, ob.relName)
	if err != nil {
		return observed{}, fmt.Errorf("reading release %s: %w", ob.relName, err)
	}
	h := records.HeadOf(rel)
	if h != nil && h.Facts == nil {
		// A rollback's copy of another revision's facts: the release's are the newest record's
		// that carries its own, as the cache of records shows them.
		if c, err := ob.w.Helm.Head(ctx, ob.scope, ob.relName); err == nil && c != nil && c.Revision == h.Revision {
			h.Facts = c.Facts
		}
	}
	ob.want.Applied = ob.applied(h)
	return observed{head: h, rel: rel, state: records.DetermineState(h, ob.want)}, nil
}

// applied is what rudder's newest own revision was made from, as the release's facts with
// newest revision h have it (see factsOf).
func (ob *observation) applied(h *records.Head) *records.Applied {
	f, _ := ob.factsOf(h)
	return f.Applied
}
