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

// AnnotationPaused: "true" stops every action on the CR's release (condition Paused), so that
// a person can `helm rollback` by hand. Removing it resumes.
const AnnotationPaused = "rudder.dev/paused"

// observe reads what the pass acts on. It returns an outcome when the pass ends here: the CR
// is paused, its values do not render, or a pre-release hook failed.
func (p *pass) observe(ctx context.Context) *outcome {
	if p.obj.GetAnnotations()[AnnotationPaused] == "true" {
		return &outcome{phase: phasePaused}
	}
	// Chart: always the last good snapshot; a broken chart on disk is reported, never used.
	cs, _ := p.w.Charts.Get(p.w.Watch.ChartPath())
	p.snap, p.chartErr = cs.Current, cs.Err
	if p.snap == nil {
		// Its load is retried with every change on disk (and each rescan), which wakes the CR.
		return stalled(rstatus.ReasonChartInvalid, fmt.Sprintf("the watch's chart has not loaded, so nothing is released: %v", cs.Err))
	}

	var err error
	if p.relName, err = p.w.Watch.ReleaseNameOf(p.obj); err != nil {
		return stalled(rstatus.ReasonValuesInvalid, err.Error())
	}
	base, out := p.valuesFrom(ctx)
	if out != nil {
		return out
	}
	if p.values, p.overridden, err = p.w.Watch.Values(p.obj, base); err != nil {
		return stalled(rstatus.ReasonValuesInvalid, err.Error())
	}
	if out := p.preReleaseHooks(ctx); out != nil {
		return out
	}
	vd, err := records.ValuesDigest(p.values)
	if err != nil {
		return stalled(rstatus.ReasonValuesInvalid, err.Error())
	}
	p.chartDigest = p.w.Watch.ChartDigest(p.snap.Digest)
	p.want = records.Desired{OwnerUID: string(p.obj.GetUID()), ChartDigest: records.LabelDigest(p.chartDigest), ValuesDigest: vd,
		Generation: p.gen}
	if p.pin, err = p.rolloutPin(ctx); err != nil {
		return retried(rstatus.ReasonReconcileError, err)
	}
	if p.pin.digest != "" {
		// A rollout keeps the CR on its own release's chart (see rollout.go).
		p.chartDigest, p.want.ChartDigest = p.pin.digest, p.pin.digest
	}
	if p.release, err = p.observeRelease(ctx, false); err != nil {
		return retried(rstatus.ReasonReconcileError, err)
	}
	return nil
}

// valuesFrom reads what the watch's valuesFrom sources hold for the CR, merged, as the
// release's identity; it returns an outcome when the pass ends here: a source that is missing
// (Stalled until it appears: its watch wakes the CR) or that may not be read (retried).
func (p *pass) valuesFrom(ctx context.Context) (map[string]any, *outcome) {
	if len(p.w.Watch.ValuesFrom) == 0 {
		return nil, nil
	}
	srcs, err := p.w.Watch.SourcesOf(p.obj)
	if err != nil {
		return nil, stalled(rstatus.ReasonValuesInvalid, err.Error())
	}
	contents, err := p.w.Sources.Read(ctx, p.scope, srcs, SourceUser{p.w.Queue, p.key})
	var unclaimed *watches.UnclaimedError
	switch {
	case errors.As(err, &unclaimed):
		// Its watch wakes the CR when the source is annotated.
		return nil, stalled(rstatus.ReasonValuesFromUnclaimed, err.Error()+"; nothing is released until it does")
	case helm.IsForbidden(err):
		o := &outcome{}
		o.endOn(p.forbidden("ReadValues", err.Error()))
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
func (p *pass) preReleaseHooks(ctx context.Context) *outcome {
	w := p.w
	for _, h := range w.Hooks.PreReleaseHooks(w.gvk()) {
		start := w.Clock.Now()
		d, err := h.PreRelease(ctx, p.obj, p.values)
		observeHook(w.label(), "pre", w.Clock.Since(start), err)
		if err != nil {
			return hookFailed(fmt.Sprintf("pre-release hook %T", h), err)
		}
		if d.Hold {
			p.held = &d
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
func (p *pass) observeRelease(ctx context.Context, fromStorage bool) (observed, error) {
	if !fromStorage {
		h, err := p.w.Helm.Head(ctx, p.scope, p.relName)
		switch {
		case err != nil:
			p.log.V(1).Info("reading the cached release head", "release", p.relName, "error", err.Error())
		case h != nil && p.st.Release != nil && h.Revision < p.st.Release.Revision:
			// The cache is behind this CR's own status (a revision a pass just made).
		case h != nil:
			p.want.Applied = p.applied(h)
			if s := records.DetermineState(h, p.want); s == records.StateInSync || s == records.StateRolledBack {
				return observed{head: h, state: s}, nil
			}
		case p.st.Release == nil:
			return observed{state: records.StateAbsent, assumed: true}, nil
		}
	}
	rel, err := p.w.Helm.Last(ctx, p.scope, p.relName)
	if err != nil {
		return observed{}, fmt.Errorf("reading release %s: %w", p.relName, err)
	}
	h := records.HeadOf(rel)
	if h != nil && h.Facts == nil {
		// A rollback's copy of another revision's facts: the release's are the newest record's
		// that carries its own, as the cache of records shows them.
		if c, err := p.w.Helm.Head(ctx, p.scope, p.relName); err == nil && c != nil && c.Revision == h.Revision {
			h.Facts = c.Facts
		}
	}
	p.want.Applied = p.applied(h)
	return observed{head: h, rel: rel, state: records.DetermineState(h, p.want)}, nil
}

// applied is what rudder's newest own revision was made from, as the release's facts with
// newest revision h have it (see factsOf).
func (p *pass) applied(h *records.Head) *records.Applied { return p.factsOf(h).Applied }
