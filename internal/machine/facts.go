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
// record carries them, and writes them there before it reports them (pass.markRecord); the
// status reports them. A release without a record (an install refused before Helm stored
// anything) has its facts in Memory: what they hold is computed again by a process without
// them (the refusal repeats). No decision reads the CR's status: a pass whose CR comes with
// no status, or with one from a cache behind, decides the same.

// factsOf are the facts of sub's release, which ownerUID owns, with newest revision h (nil:
// none): as its records carry them; with no record, as Memory keeps them. A record that
// carries none (one rudder made before 647f429, or another owner's) has none, and so has a
// release with neither. With them, the message of the failure among them Memory keeps ("":
// none; a record's facts have none, no label holds it).
func factsOf(sub *subject, ownerUID string, h *records.Head) (records.Facts, string) {
	switch {
	case h == nil:
		kept, message, _ := sub.w.Memory.unrecordedFacts(sub.key, sub.obj.GetUID())
		return kept, message
	case h.Facts != nil && h.OwnerUID == ownerUID:
		return *h.Facts, ""
	}
	return records.Facts{}, ""
}

// heldBackFailure is the failure that holds want back, as the release's facts f have it (nil:
// none). Its message is msg, the one Memory keeps; else Helm's error as the status st reports
// it, when it reports this failure: no label holds it.
func heldBackFailure(f records.Facts, msg string, want records.Desired, st *rstatus.Release) *failure {
	ff := f.Failed
	if !ff.Holds(want) {
		return nil
	}
	held := &failure{reason: string(ff.Cause), failed: rstatus.FailedRelease{ChartDigest: ff.ChartDigest, ValuesDigest: ff.ValuesDigest,
		Reason: string(ff.Cause), Failures: ff.Count}}
	if !ff.At.IsZero() {
		held.failed.LastFailure = &metav1.Time{Time: ff.At}
	}
	switch {
	case msg != "":
		held.failed.Message = msg
	case st != nil && st.Failed != nil && st.Failed.ChartDigest == ff.ChartDigest && st.Failed.ValuesDigest == ff.ValuesDigest:
		held.failed.Message = st.Failed.Message
		if st.Failed.LastFailure != nil && st.Failed.LastFailure.Unix() == ff.At.Unix() {
			held.failed.LastFailure = st.Failed.LastFailure
		}
	default:
		held.failed.Message = fmt.Sprintf("%s, %d time(s), as the release's record says", strings.ToLower(string(ff.Cause)), ff.Count)
	}
	return held
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

// recordedFacts is what of the release's facts f (with held, the failure among them that
// holds the CR's pair back) sub's status does not report (a pass whose status write was lost,
// or a process that was gone before it wrote it): this pass reports it, as it reports tested,
// a run of the tests its record holds.
func recordedFacts(sub *subject, f records.Facts, held *failure, tested *testRecord) result {
	var res result
	if t := tested; t != nil {
		res.record.tested = t.tested
		res.conditions = map[string]*condition{rstatus.TypeTested: t.cond}
	}
	var st rstatus.Release
	if sub.read.Release != nil {
		st = *sub.read.Release
	}
	if held != nil && (st.Failed == nil || !sameFailure(*st.Failed, held.failed)) {
		res.record.failed = held
	}
	for _, n := range []struct {
		annotation, handled, reported string
		rec                           **string
	}{
		{AnnotationRollbackTo, f.RollbackTo, st.RollbackRequest, &res.record.rollbackRequest},
		{AnnotationReconcileAt, f.ReconcileAt, st.ReconcileRequest, &res.record.reconcileRequest},
		{AnnotationResetAt, f.ResetAt, st.ResetRequest, &res.record.resetRequest},
	} {
		// A value handled is known by its hash: the annotation's, when it is still set.
		if v := strings.TrimSpace(sub.obj.GetAnnotations()[n.annotation]); v != "" && v != n.reported && records.HandledValue(v) == n.handled {
			*n.rec = &v
		}
	}
	return res
}

// nudges is what the reconcile-at and reset-at values due on sub (see requestDue), against the
// release's facts f, record: handled, and for a reset the held-back failure cleared. Either
// lets this pass try the held-back pair again (plan.Situation.HeldBack); reset says a reset
// is due.
func nudges(sub *subject, f records.Facts) (rec *record, reset bool) {
	var r record
	if v, due := requestDue(sub, AnnotationReconcileAt, f.ReconcileAt); due {
		r.reconcileRequest = &v
	}
	if v, due := requestDue(sub, AnnotationResetAt, f.ResetAt); due {
		r.resetRequest, r.clearFailed, reset = &v, true, true
	}
	if r.reconcileRequest == nil && r.resetRequest == nil {
		return nil, false
	}
	return &r, reset
}

// factsAfter are the release's facts f once the steps of o recorded what they learned, in
// their order.
func factsAfter(f records.Facts, o *outcome) records.Facts {
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

// failureMessageAfter is the message of the failure the release's facts hold once the steps
// of o recorded what they learned: the last failure a step met, else held, the one held back
// ("": none).
func failureMessageAfter(held *failure, o *outcome) string {
	msg := ""
	if held != nil {
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

// testRecord is a run of a revision's tests as status.release.tested and the Tested condition
// report it.
type testRecord struct {
	tested *rstatus.TestedRelease
	cond   *condition
}

// testedFromRecord is the run of the tests of the newest revision of sub's release relName
// (as found: found) as its record holds it, when sub's status does not report it (nil: none):
// the outcome its labels say, and which tests ran and failed as Helm recorded each test hook's
// last run (the labels' outcome alone when the record cannot be read).
func testedFromRecord(ctx context.Context, sub *subject, relName string, found observed) *testRecord {
	h := found.head
	if h == nil || h.Tested() == "" {
		return nil
	}
	if st := sub.read.Release; st != nil && st.Tested != nil && (st.Tested.Revision > h.Revision || st.Tested.Revision == h.Revision &&
		(h.TestedAt.IsZero() || st.Tested.At != nil && !st.Tested.At.Before(&metav1.Time{Time: h.TestedAt}))) {
		// The status reports this run (or a later one: a periodic run's, at the time it
		// ended).
		return nil
	}
	rel := found.rel
	if rel == nil || rel.Version != h.Revision {
		var err error
		if rel, err = sub.w.Helm.History.Revision(ctx, sub.scope, relName, h.Revision); err != nil {
			sub.log.V(1).Info("reading the tested revision", "release", relName, "revision", h.Revision, "error", err.Error())
		}
	}
	var at *metav1.Time
	if !h.TestedAt.IsZero() {
		at = &metav1.Time{Time: h.TestedAt}
	}
	if ran, failedHooks := helm.Tests(rel); len(ran) > 0 && (len(failedHooks) > 0) == (h.Tested() != records.TestSucceeded) {
		t, c := testRun(h.Revision, ran, failedHooks)
		t.At = at
		return &testRecord{t, c}
	}
	if h.Tested() == records.TestSucceeded {
		return &testRecord{&rstatus.TestedRelease{Revision: h.Revision, Result: h.Tested(), At: at},
			&condition{metav1.ConditionTrue, rstatus.ReasonTestSucceeded, fmt.Sprintf("revision %d: tests passed, as its release record says",
				h.Revision)}}
	}
	return &testRecord{&rstatus.TestedRelease{Revision: h.Revision, Result: h.Tested(), At: at},
		&condition{metav1.ConditionFalse, rstatus.ReasonTestFailed, fmt.Sprintf("revision %d: tests failed, as its release record says",
			h.Revision)}}
}

// requestDue returns the value of an annotation of sub that asks for something once per value
// (rollback-to, reconcile-at, reset-at) and whether this pass acts on it: set, and not the
// value handled, as the release's facts hash it (records.HandledValue).
func requestDue(sub *subject, annotation, handled string) (string, bool) {
	v := strings.TrimSpace(sub.obj.GetAnnotations()[annotation])
	return v, v != "" && records.HandledValue(v) != handled
}
