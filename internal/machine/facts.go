package machine

import (
	"context"
	"fmt"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	rstatus "github.com/rudder-operator/rudder/api/status"
	"github.com/rudder-operator/rudder/internal/records"
)

// The release's facts (records.Facts: the failure that holds a (chart, values) back, the
// values of the once-per-value annotations handled) are kept in the labels of its newest
// record. A pass decides from them as that record carries them, and writes them there before
// it reports them (markRecord); the status reports them and is read for them only where no
// record carries them: no record at all (a failed install leaves none) or an older rudder's
// (records.LabelFacts absent), which the pass then marks with them, once.

// facts are the release's facts as the pass found them.
func (p *pass) facts() records.Facts {
	if p.known == nil {
		f := p.factsOf(p.release.head)
		p.known = &f
	}
	return *p.known
}

// factsOf are the release's facts with newest revision h (nil: none): as its records carry
// them, else as the CR's status reports them.
func (p *pass) factsOf(h *records.Head) records.Facts {
	if h != nil && h.Facts != nil && h.OwnerUID == p.want.OwnerUID {
		return *h.Facts
	}
	var f records.Facts
	st := p.st.Release
	if st == nil {
		return f
	}
	// What is not a label value was not written by rudder (a status written over by hand): it
	// is no fact.
	if x := st.Failed; x != nil && labelValues(x.ChartDigest, x.ValuesDigest, x.Reason) {
		f.Failed = failureFact(*x)
	}
	if a := st.Applied; a != nil && labelValues(a.ChartDigest) {
		f.Applied = &records.Applied{Generation: a.Generation, ChartDigest: a.ChartDigest}
	}
	f.RollbackTo = records.HandledValue(st.RollbackRequest)
	f.ReconcileAt, f.ResetAt = records.HandledValue(st.ReconcileRequest), records.HandledValue(st.ResetRequest)
	return f
}

// failureFact is the fact of a failure as status.release.failed reports it.
func failureFact(x rstatus.FailedRelease) *records.Failure {
	f := &records.Failure{ChartDigest: x.ChartDigest, ValuesDigest: x.ValuesDigest, Cause: records.Cause(x.Reason), Count: failures(&failure{failed: x})}
	if x.LastFailure != nil {
		f.At = x.LastFailure.Time
	}
	return f
}

// heldBackFailure is the failure that holds the desired (chart, values) back, as the
// release's facts have it. Its message is Helm's error as the status reports it, when it
// reports this failure: no label holds it.
func (p *pass) heldBackFailure() (*failure, bool) {
	f := p.facts().Failed
	if !f.Holds(p.want) {
		return nil, false
	}
	held := &failure{reason: string(f.Cause), failed: rstatus.FailedRelease{ChartDigest: f.ChartDigest, ValuesDigest: f.ValuesDigest,
		Reason: string(f.Cause), Failures: f.Count}}
	if !f.At.IsZero() {
		held.failed.LastFailure = &metav1.Time{Time: f.At}
	}
	if st := p.st.Release; st != nil && st.Failed != nil && st.Failed.ChartDigest == f.ChartDigest && st.Failed.ValuesDigest == f.ValuesDigest {
		held.failed.Message = st.Failed.Message
		if st.Failed.LastFailure != nil && st.Failed.LastFailure.Unix() == f.At.Unix() {
			held.failed.LastFailure = st.Failed.LastFailure
		}
	} else {
		held.failed.Message = fmt.Sprintf("%s, %d time(s), as the release's record says", strings.ToLower(string(f.Cause)), f.Count)
	}
	return held, true
}

// recordedFacts is what of the release's facts the CR's status does not report (a pass whose
// status write was lost, or a process that was gone before it wrote it): this pass reports
// it, as it reports a run of the tests its record holds.
func (p *pass) recordedFacts(ctx context.Context) result {
	var res result
	if h := p.release.head; h != nil && h.Tested() != "" {
		if st := p.st.Release; st == nil || st.Tested == nil || st.Tested.Revision < h.Revision {
			t, c := p.testedFromRecord(ctx, h)
			res.record.tested = t
			res.conditions = map[string]*condition{rstatus.TypeTested: c}
		}
	}
	var st rstatus.Release
	if p.st.Release != nil {
		st = *p.st.Release
	}
	if held, ok := p.heldBackFailure(); ok && (st.Failed == nil || !sameFailure(*st.Failed, held.failed)) {
		res.record.failed = held
	}
	f := p.facts()
	for _, n := range []struct {
		annotation, handled, reported string
		rec                           **string
	}{
		{AnnotationRollbackTo, f.RollbackTo, st.RollbackRequest, &res.record.rollbackRequest},
		{AnnotationReconcileAt, f.ReconcileAt, st.ReconcileRequest, &res.record.reconcileRequest},
		{AnnotationResetAt, f.ResetAt, st.ResetRequest, &res.record.resetRequest},
	} {
		// A value handled is known by its hash: the annotation's, when it is still set.
		if v := strings.TrimSpace(p.obj.GetAnnotations()[n.annotation]); v != "" && v != n.reported && records.HandledValue(v) == n.handled {
			*n.rec = &v
		}
	}
	return res
}

// factsAfter are the release's facts once the pass's steps recorded what they learned, in
// their order.
func (p *pass) factsAfter(o *outcome) records.Facts {
	f := p.facts()
	if o == nil {
		return f
	}
	for _, rec := range o.records {
		switch {
		case rec.failed != nil:
			f.Failed = failureFact(rec.failed.failed)
		case rec.clearFailed:
			f.Failed = nil
		}
		if r := rec.revision; r != nil && r.applied != nil {
			f.Applied = &records.Applied{Generation: r.applied.Generation, ChartDigest: r.applied.ChartDigest}
		}
		for _, v := range []struct {
			value *string
			fact  *string
		}{{rec.rollbackRequest, &f.RollbackTo}, {rec.reconcileRequest, &f.ReconcileAt}, {rec.resetRequest, &f.ResetAt}} {
			if v.value != nil {
				*v.fact = records.HandledValue(*v.value)
			}
		}
	}
	return f
}

// markRecord writes the release's facts, as the pass leaves them, on the newest revision's
// record, when it does not carry them already: the pass's status is written after it, and
// reports what the record holds. A release that is not the CR's (another owner's), one
// another operation holds (pending), and no release, are not written.
func (p *pass) markRecord(ctx context.Context, o *outcome) error {
	h := o.newest
	if !o.ended && len(o.steps) > 0 {
		// The actions did not end (a look at the history after one failed): the newest
		// revision as the cache of records shows it, with what this process wrote.
		var err error
		if h, err = p.w.Helm.Head(ctx, p.scope, p.relName); err != nil {
			return err
		}
	}
	if h == nil || h.OwnerUID != p.want.OwnerUID || h.Pending() {
		return nil
	}
	f := p.factsAfter(o)
	if h.Facts != nil && h.Facts.Of == h.Revision && h.Facts.Equal(&f) {
		return nil
	}
	if err := p.w.Helm.WriteFacts(ctx, p.scope, p.relName, h.Revision, f); err != nil {
		if apierrors.IsNotFound(err) {
			return nil // gone meanwhile (an uninstall): no record to keep them on
		}
		return err
	}
	f.Of = h.Revision
	h.Facts = &f
	return nil
}

// sameFailure reports whether a and b report the same failure (times to the second, as the
// facts keep them).
func sameFailure(a, b rstatus.FailedRelease) bool {
	at := func(t *metav1.Time) int64 {
		if t == nil {
			return 0
		}
		return t.Unix()
	}
	return a.ChartDigest == b.ChartDigest && a.ValuesDigest == b.ValuesDigest && a.Reason == b.Reason &&
		max(a.Failures, 1) == max(b.Failures, 1) && at(a.LastFailure) == at(b.LastFailure) && a.Message == b.Message
}

// labelValues reports whether every v is a valid label value.
func labelValues(vs ...string) bool {
	for _, v := range vs {
		if len(validation.IsValidLabelValue(v)) > 0 {
			return false
		}
	}
	return true
}
