package controllers

import (
	"context"
	"fmt"

	"helm.sh/helm/v3/pkg/release"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	rstatus "github.com/rudder-operator/rudder/api/status"
	"github.com/rudder-operator/rudder/internal/helm"
	"github.com/rudder-operator/rudder/internal/records"
)

// madeRecord records a revision rudder made from the spec, and lets any held-back pair go.
func (e *env) madeRecord(rel *release.Release) record {
	return record{clearFailed: true, revision: &revisionRecord{
		number: rel.Version, chart: helm.ChartRef(rel.Chart), chartDigest: e.want.ChartDigest, valuesDigest: e.want.ValuesDigest,
		applied: &rstatus.AppliedRelease{Revision: rel.Version, Generation: e.gen, ChartDigest: e.want.ChartDigest},
	}}
}

// failedRecord holds the desired (chart, values) back after it failed for reason: one failure
// more than the held-back one's, unless this pass reset the history.
func (e *env) failedRecord(reason string, err error) record {
	at := metav1.NewTime(e.clock.Now())
	return record{failed: &failure{reason: reason, failed: rstatus.FailedRelease{
		ChartDigest: e.want.ChartDigest, ValuesDigest: e.want.ValuesDigest, Reason: reason, Message: truncate(err.Error(), 1000),
		Failures: e.failures + 1, LastFailure: &at}}}
}

// writeRelease writes what the pass's steps learned into status.release, in their order, and
// keeps the shadows (see shadow) of what it writes for the passes that read a cache that
// does not show it yet, with the conditions o sets for them.
func (p *pass) writeRelease(o *outcome) {
	if c := o.conditions[rstatus.TypeDrifted]; c != nil {
		p.r.shadows.drifts.remember(p.key, p.obj.GetUID(), *c)
	}
	for _, rec := range o.records {
		if rec.revision == nil && rec.failed == nil && !rec.clearFailed && rec.rollbackRequest == nil && rec.tested == nil &&
			rec.reconcileRequest == nil && rec.resetRequest == nil {
			continue
		}
		st := p.releaseStatus()
		if r := rec.revision; r != nil {
			st.Name, st.Revision, st.Chart = p.relName, r.number, r.chart
			st.ChartDigest, st.ValuesDigest, st.RolledBackTo = r.chartDigest, r.valuesDigest, r.rolledBackTo
			if r.applied != nil {
				st.Applied = r.applied
			}
		}
		switch {
		case rec.failed != nil:
			st.Failed = &rec.failed.failed
			p.r.shadows.failures.remember(p.key, p.obj.GetUID(), *rec.failed)
		case rec.clearFailed:
			st.Failed = nil
			p.r.shadows.failures.forget(p.key)
		}
		if v := rec.rollbackRequest; v != nil {
			st.RollbackRequest = *v
			p.r.shadows.rollbacks.remember(p.key, p.obj.GetUID(), written[string]{*v, o.conditions[rstatus.TypeRollbackRequest]})
		}
		if v := rec.reconcileRequest; v != nil {
			st.ReconcileRequest = *v
			p.r.shadows.reconciles.remember(p.key, p.obj.GetUID(), *v)
		}
		if v := rec.resetRequest; v != nil {
			st.ResetRequest = *v
			p.r.shadows.resets.remember(p.key, p.obj.GetUID(), *v)
		}
		if t := rec.tested; t != nil {
			st.Tested = t
		}
	}
}

// shadows are, per CR, what passes wrote into status.release, for the passes that read the
// CR from a cache that does not show that write yet: the failure that holds a (chart, values)
// back, the rollback-to value handled (with the condition written with it). A run of the tests
// is not one: its record holds it (see testedFromRecord).
type shadows struct {
	failures  *shadow[failure]
	rollbacks *shadow[written[string]]
	// reconciles and resets are the reconcile-at and reset-at values handled.
	reconciles, resets *shadow[string]
	// drifts is the Drifted condition written last (driftDetection.mode warn), which no
	// record goes with.
	drifts *shadow[condition]
}

func newShadows() *shadows {
	return &shadows{failures: newShadow[failure](), rollbacks: newShadow[written[string]](),
		reconciles: newShadow[string](), resets: newShadow[string](), drifts: newShadow[condition]()}
}

// forget drops what is kept of the CR at key.
func (s *shadows) forget(key types.NamespacedName) {
	s.failures.forget(key)
	s.rollbacks.forget(key)
	s.reconciles.forget(key)
	s.resets.forget(key)
	s.drifts.forget(key)
}

// releaseStatus returns the status's release record, creating it.
func (p *pass) releaseStatus() *rstatus.Release {
	if p.st.Release == nil {
		p.st.Release = &rstatus.Release{Name: p.relName}
	}
	return p.st.Release
}

// heldBackFailure is the failure that holds the desired (chart, values) back: as
// status.release.failed records it, or as the pass that failed wrote it when the cache does
// not show that write yet (events from the failed attempt's own objects wake passes that
// fast), whichever counts more failures (a cache may show an earlier one of the same pair).
// Its reason is the one recorded (empty in a record an older rudder wrote).
func (p *pass) heldBackFailure() (*failure, bool) {
	var held *failure
	if f := p.st.Release; f != nil && f.Failed != nil && f.Failed.ChartDigest == p.want.ChartDigest && f.Failed.ValuesDigest == p.want.ValuesDigest {
		held = &failure{reason: f.Failed.Reason, failed: *f.Failed}
	}
	if m, ok := p.r.shadows.failures.of(p.key, p.obj.GetUID()); ok && m.failed.ChartDigest == p.want.ChartDigest && m.failed.ValuesDigest == p.want.ValuesDigest &&
		(held == nil || failures(&m) > failures(held)) {
		held = &m
	}
	return held, held != nil
}

// shadowed is what passes whose status writes the cache does not show yet recorded (a
// rollback-to value handled, the drift found, each with a condition of its own; a nudge's value
// handled), and the test run the newest revision's record holds: this pass records it again,
// or its status write would drop it.
func (p *pass) shadowed(ctx context.Context) result {
	var res result
	set := func(typ string, c *condition) {
		if res.conditions == nil {
			res.conditions = map[string]*condition{}
		}
		res.conditions[typ] = c
	}
	// A run of the newest revision's tests that its record holds and the CR's status (as read)
	// does not: a pass whose status write the cache does not show yet, a status lost, or a
	// process that is gone. Reported from the record.
	if h := p.release.head; h != nil && h.Tested() != "" {
		if st := p.st.Release; st == nil || st.Tested == nil || st.Tested.Revision < h.Revision {
			t, c := p.testedFromRecord(ctx, h)
			res.record.tested = t
			set(rstatus.TypeTested, c)
		}
	}
	if d, ok := p.r.shadows.drifts.of(p.key, p.obj.GetUID()); ok {
		if c := p.cond(rstatus.TypeDrifted); c == nil || c.Status != d.status || c.Reason != d.reason || c.Message != d.message {
			set(rstatus.TypeDrifted, &d)
		}
	}
	if r, ok := p.r.shadows.rollbacks.of(p.key, p.obj.GetUID()); ok && r.value != p.rollbackRequest() {
		set(rstatus.TypeRollbackRequest, r.cond)
		res.record.rollbackRequest = &r.value
	}
	// The nudges' handled values go with no condition: without them here, the status write
	// would take a handled value back.
	if v, ok := p.r.shadows.reconciles.of(p.key, p.obj.GetUID()); ok && (p.st.Release == nil || p.st.Release.ReconcileRequest != v) {
		res.record.reconcileRequest = &v
	}
	if v, ok := p.r.shadows.resets.of(p.key, p.obj.GetUID()); ok && (p.st.Release == nil || p.st.Release.ResetRequest != v) {
		res.record.resetRequest = &v
	}
	return res
}

// rollbackRequest is the rollback-to value handled so far, as status.release records it.
func (p *pass) rollbackRequest() string {
	if p.st.Release == nil {
		return ""
	}
	return p.st.Release.RollbackRequest
}

// testedFromRecord is the run of revision h's tests as its record holds it: the outcome its
// labels say, and which tests ran and failed as Helm recorded each test hook's last run (the
// labels' outcome alone when the record cannot be read).
func (p *pass) testedFromRecord(ctx context.Context, h *records.Head) (*rstatus.TestedRelease, *condition) {
	rel := p.release.rel
	if rel == nil || rel.Version != h.Revision {
		var err error
		if rel, err = p.r.opts.Helm.Revision(ctx, p.scope, p.relName, h.Revision); err != nil {
			p.log.V(1).Info("reading the tested revision", "release", p.relName, "revision", h.Revision, "error", err.Error())
		}
	}
	if ran, failedHooks := helm.Tests(rel); len(ran) > 0 && (len(failedHooks) > 0) == (h.Tested() != records.TestSucceeded) {
		return testRun(h.Revision, ran, failedHooks)
	}
	if h.Tested() == records.TestSucceeded {
		return &rstatus.TestedRelease{Revision: h.Revision, Result: h.Tested()},
			&condition{metav1.ConditionTrue, rstatus.ReasonTestSucceeded, fmt.Sprintf("revision %d: tests passed, as its release record says", h.Revision)}
	}
	return &rstatus.TestedRelease{Revision: h.Revision, Result: h.Tested()},
		&condition{metav1.ConditionFalse, rstatus.ReasonTestFailed, fmt.Sprintf("revision %d: tests failed, as its release record says", h.Revision)}
}
