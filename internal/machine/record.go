package machine

import (
	"context"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	rstatus "github.com/rudder-operator/rudder/api/status"
	"github.com/rudder-operator/rudder/internal/helm"
	"github.com/rudder-operator/rudder/internal/records"
	"github.com/rudder-operator/rudder/internal/release"
)

// madeRecord records a revision rudder made from the spec, and lets any held-back pair go.
func (e *env) madeRecord(rel *release.Release) record {
	return record{clearFailed: true, revision: &revisionRecord{
		number: rel.Version, chart: rel.Chart.Ref(), chartDigest: e.want.ChartDigest, valuesDigest: e.want.ValuesDigest,
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

// writeRelease writes what the pass's steps learned into status.release, in their order.
func (p *pass) writeRelease(o *outcome) {
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
		case rec.clearFailed:
			st.Failed = nil
		}
		if v := rec.rollbackRequest; v != nil {
			st.RollbackRequest = *v
		}
		if v := rec.reconcileRequest; v != nil {
			st.ReconcileRequest = *v
		}
		if v := rec.resetRequest; v != nil {
			st.ResetRequest = *v
		}
		if t := rec.tested; t != nil {
			st.Tested = t
		}
	}
}

// releaseStatus returns the status's release record, creating it.
func (p *pass) releaseStatus() *rstatus.Release {
	if p.st.Release == nil {
		p.st.Release = &rstatus.Release{Name: p.relName}
	}
	return p.st.Release
}

// testedFromRecord is the run of revision h's tests as its record holds it: the outcome its
// labels say, and which tests ran and failed as Helm recorded each test hook's last run (the
// labels' outcome alone when the record cannot be read).
func (p *pass) testedFromRecord(ctx context.Context, h *records.Head) (*rstatus.TestedRelease, *condition) {
	rel := p.release.rel
	if rel == nil || rel.Version != h.Revision {
		var err error
		if rel, err = p.w.Helm.Revision(ctx, p.scope, p.relName, h.Revision); err != nil {
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
