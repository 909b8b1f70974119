package machine

import (
	"context"
	"fmt"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	rstatus "github.com/rudder-operator/rudder/api/status"
	"github.com/rudder-operator/rudder/internal/helm"
	"github.com/rudder-operator/rudder/internal/records"
)

// The release's facts (records.Facts: the failure that holds a (chart, values) back, the
// values of the once-per-value annotations handled, what rudder's newest own revision was
// made from) are kept in the labels of its newest record. A pass decides from them as that
// record carries them, and writes them there before it reports them (markRecord); the
// status reports them. A release without a record (an install refused before Helm stored
// anything) has its facts in Memory: what they hold is computed again by a process without
// them (the refusal repeats). No decision reads the CR's status: a pass whose CR comes with
// no status, or with one from a cache behind, decides the same.

// facts are the release's facts as the pass found them.
func (ob *observation) facts() records.Facts {
	if ob.known == nil {
		f, msg := ob.factsOf(ob.release.head)
		ob.known = &known{facts: f, message: msg}
	}
	return ob.known.facts
}

// factsOf are the release's facts with newest revision h (nil: none): as its records carry
// them; with no record, as Memory keeps them. A record that carries none (one rudder made
// before 647f429, or another owner's) has none, and so has a release with neither. With them,
// the message of the failure among them Memory keeps ("": none; a record's facts have none,
// no label holds it).
func (ob *observation) factsOf(h *records.Head) (records.Facts, string) {
	switch {
	case h == nil:
		kept, message, _ := ob.w.Memory.unrecordedFacts(ob.key, ob.obj.GetUID())
		return kept, message
	case h.Facts != nil && h.OwnerUID == ob.want.OwnerUID:
		return *h.Facts, ""
	}
	return records.Facts{}, ""
}

// failureFact is the fact of a failure as status.release.failed reports it.
func failureFact(x rstatus.FailedRelease) *records.Failure {
	f := &records.Failure{ChartDigest: x.ChartDigest, ValuesDigest: x.ValuesDigest, Cause: records.Cause(x.Reason),
		Count: failures(&failure{failed: x})}
	if x.LastFailure != nil {
		f.At = x.LastFailure.Time
	}
	return f
}

// heldBackFailure is the failure that holds the desired (chart, values) back, as the
// release's facts have it. Its message is Helm's error as the status reports it, when it
// reports this failure: no label holds it.
func (ob *observation) heldBackFailure() (*failure, bool) {
	f := ob.facts().Failed
	if !f.Holds(ob.want) {
		return nil, false
	}
	held := &failure{reason: string(f.Cause), failed: rstatus.FailedRelease{ChartDigest: f.ChartDigest, ValuesDigest: f.ValuesDigest,
		Reason: string(f.Cause), Failures: f.Count}}
	if !f.At.IsZero() {
		held.failed.LastFailure = &metav1.Time{Time: f.At}
	}
	if msg := ob.known.message; msg != "" {
		held.failed.Message = msg
	} else if st := ob.read.Release; st != nil && st.Failed != nil && st.Failed.ChartDigest == f.ChartDigest &&
		st.Failed.ValuesDigest == f.ValuesDigest {
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
func (ob *observation) recordedFacts(ctx context.Context) result {
	var res result
	if h := ob.release.head; h != nil && h.Tested() != "" {
		if st := ob.read.Release; st == nil || st.Tested == nil || st.Tested.Revision < h.Revision {
			t, c := ob.testedFromRecord(ctx, h)
			res.record.tested = t
			res.conditions = map[string]*condition{rstatus.TypeTested: c}
		}
	}
	var st rstatus.Release
	if ob.read.Release != nil {
		st = *ob.read.Release
	}
	if held, ok := ob.heldBackFailure(); ok && (st.Failed == nil || !sameFailure(*st.Failed, held.failed)) {
		res.record.failed = held
	}
	f := ob.facts()
	for _, n := range []struct {
		annotation, handled, reported string
		rec                           **string
	}{
		{AnnotationRollbackTo, f.RollbackTo, st.RollbackRequest, &res.record.rollbackRequest},
		{AnnotationReconcileAt, f.ReconcileAt, st.ReconcileRequest, &res.record.reconcileRequest},
		{AnnotationResetAt, f.ResetAt, st.ResetRequest, &res.record.resetRequest},
	} {
		// A value handled is known by its hash: the annotation's, when it is still set.
		if v := strings.TrimSpace(ob.obj.GetAnnotations()[n.annotation]); v != "" && v != n.reported && records.HandledValue(v) == n.handled {
			*n.rec = &v
		}
	}
	return res
}

// factsAfter are the release's facts once the pass's steps recorded what they learned, in
// their order.
func (ob *observation) factsAfter(o *outcome) records.Facts {
	f := ob.facts()
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

// failureMessageAfter is the message of the failure the release's facts hold once the
// pass's steps recorded what they learned: the last failure a step met, else the one held
// back ("": none).
func (ob *observation) failureMessageAfter(o *outcome) string {
	msg := ""
	if held, ok := ob.heldBackFailure(); ok {
		msg = held.failed.Message
	}
	if o == nil {
		return msg
	}
	for _, rec := range o.records {
		switch {
		case rec.failed != nil:
			msg = rec.failed.failed.Message
		case rec.clearFailed:
			msg = ""
		}
	}
	return msg
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

// testedFromRecord is the run of revision h's tests as its record holds it: the outcome its
// labels say, and which tests ran and failed as Helm recorded each test hook's last run (the
// labels' outcome alone when the record cannot be read).
func (ob *observation) testedFromRecord(ctx context.Context, h *records.Head) (*rstatus.TestedRelease, *condition) {
	rel := ob.release.rel
	if rel == nil || rel.Version != h.Revision {
		var err error
		if rel, err = ob.w.Helm.Revision(ctx, ob.scope, ob.relName, h.Revision); err != nil {
			ob.log.V(1).Info("reading the tested revision", "release", ob.relName, "revision", h.Revision, "error", err.Error())
		}
	}
	if ran, failedHooks := helm.Tests(rel); len(ran) > 0 && (len(failedHooks) > 0) == (h.Tested() != records.TestSucceeded) {
		return testRun(h.Revision, ran, failedHooks)
	}
	if h.Tested() == records.TestSucceeded {
		return &rstatus.TestedRelease{Revision: h.Revision, Result: h.Tested()},
			&condition{metav1.ConditionTrue, rstatus.ReasonTestSucceeded, fmt.Sprintf("revision %d: tests passed, as its release record says",
				h.Revision)}
	}
	return &rstatus.TestedRelease{Revision: h.Revision, Result: h.Tested()},
		&condition{metav1.ConditionFalse, rstatus.ReasonTestFailed, fmt.Sprintf("revision %d: tests failed, as its release record says",
			h.Revision)}
}
