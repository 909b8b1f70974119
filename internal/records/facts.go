package records

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"strconv"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Facts are what a pass decides from besides the revision itself: the failure that holds a
// (chart, values) back, the last value handled of each annotation that asks for something
// once per value, and what rudder's newest own revision was made from. rudder keeps them in
// the labels of a release's newest record, where the cache of records shows them to every
// pass (and Written, before the cache does), and writes them there whenever a pass learns
// them: a CR's status only reports them.
//
// Helm's upgrade carries the labels of the newest record to the new one, and rudder's install
// and upgrade stamp them as the new revision's own. A rollback copies the labels of the
// revision it returns to, whose facts are then another revision's: the release's facts are
// those of the newest record that carries its own (NewestHead), until the pass that rolled
// back (or the next, after a person's helm rollback) writes them on the copy.
const (
	// LabelFacts is the revision number of the record the facts were written on: a record
	// whose value is another number holds a copy (a rollback's), one without it is an older
	// rudder's, whose facts are in its CR's status.
	LabelFacts = "rudder.dev/facts"
	// LabelFailedChart and LabelFailedValues are the (chart, values) that failed (LabelDigest
	// forms); LabelFailureCause why (the Released reason: InstallFailed, UpgradeFailed,
	// ChartInvalid, PostRenderFailed, TestFailed); LabelFailures how often in a row, and
	// LabelFailedAt when last (Unix seconds).
	LabelFailedChart  = "rudder.dev/failed-chart"
	LabelFailedValues = "rudder.dev/failed-values"
	LabelFailureCause = "rudder.dev/failure-cause"
	LabelFailures     = "rudder.dev/failures"
	LabelFailedAt     = "rudder.dev/failed-at"
	// LabelRollbackToHandled, LabelReconcileAtHandled and LabelResetAtHandled are the last
	// values of rudder.dev/rollback-to, reconcile-at and reset-at handled, as HandledValue
	// hashes them (a label value cannot hold every annotation value).
	LabelRollbackToHandled  = "rudder.dev/rollback-to-handled"
	LabelReconcileAtHandled = "rudder.dev/reconcile-at-handled"
	LabelResetAtHandled     = "rudder.dev/reset-at-handled"
	// LabelAppliedGeneration and LabelAppliedChart are the CR's generation and the chart
	// (LabelDigest form) that rudder's newest install or upgrade was made from, or that it
	// last found the deployed revision made from: a revision rudder did not make is kept
	// while they are the CR's and the watch's now (StateRolledBack).
	LabelAppliedGeneration = "rudder.dev/applied-generation"
	LabelAppliedChart      = "rudder.dev/applied-chart"
)

// FactLabels are the labels Facts are written as: a record's facts are exactly its values of
// these.
var FactLabels = []string{LabelFacts, LabelFailedChart, LabelFailedValues, LabelFailureCause, LabelFailures, LabelFailedAt,
	LabelRollbackToHandled, LabelReconcileAtHandled, LabelResetAtHandled, LabelAppliedGeneration, LabelAppliedChart}

// Cause is why a (chart, values) failed: the reason Released gave when it did.
type Cause string

// Failure is a failure of a (chart, values) that holds it back.
type Failure struct {
	ChartDigest, ValuesDigest string // LabelDigest forms
	Cause                     Cause
	// Count is how often it failed in a row; At is when it failed last (to the second).
	Count int
	At    time.Time
}

// Facts are a release's facts (see LabelFacts).
type Facts struct {
	// Of is the revision whose record they were written on (LabelFacts).
	Of int
	// Failed is the failure that holds a (chart, values) back (nil: none).
	Failed *Failure
	// RollbackTo, ReconcileAt and ResetAt are the last values of each annotation handled,
	// hashed (HandledValue; "": none).
	RollbackTo, ReconcileAt, ResetAt string
	// Applied is what rudder's newest own revision was made from (nil: not known).
	Applied *Applied
}

// HandledValue is the form of an annotation's value that LabelRollbackToHandled and its
// siblings hold: its SHA-256, in 40 hex digits ("" for "").
func HandledValue(v string) string {
	if v = strings.TrimSpace(v); v == "" {
		return ""
	}
	sum := sha256.Sum256([]byte(v))
	return hex.EncodeToString(sum[:])[:digestLen]
}

// Labels are f as the labels of the record of revision version (LabelFacts); a fact that is
// not known is not set.
func (f Facts) Labels(version int) map[string]string {
	l := map[string]string{LabelFacts: strconv.Itoa(version)}
	if x := f.Failed; x != nil {
		l[LabelFailedChart], l[LabelFailedValues], l[LabelFailureCause] = x.ChartDigest, x.ValuesDigest, string(x.Cause)
		l[LabelFailures] = strconv.Itoa(max(x.Count, 1))
		if !x.At.IsZero() {
			l[LabelFailedAt] = strconv.FormatInt(x.At.Unix(), 10)
		}
	}
	for k, v := range map[string]string{LabelRollbackToHandled: f.RollbackTo, LabelReconcileAtHandled: f.ReconcileAt,
		LabelResetAtHandled: f.ResetAt} {
		if v != "" {
			l[k] = v
		}
	}
	if a := f.Applied; a != nil {
		l[LabelAppliedGeneration], l[LabelAppliedChart] = strconv.FormatInt(a.Generation, 10), a.ChartDigest
	}
	return l
}

// FactsOf reads the facts of a record's labels; nil when it carries none (LabelFacts absent).
func FactsOf(l map[string]string) *Facts {
	of := labelInt(l, LabelFacts)
	if of <= 0 {
		return nil
	}
	f := &Facts{Of: of, RollbackTo: l[LabelRollbackToHandled], ReconcileAt: l[LabelReconcileAtHandled], ResetAt: l[LabelResetAtHandled]}
	if g, err := strconv.ParseInt(l[LabelAppliedGeneration], 10, 64); err == nil && l[LabelAppliedChart] != "" {
		f.Applied = &Applied{Generation: g, ChartDigest: l[LabelAppliedChart]}
	}
	if l[LabelFailedChart] != "" || l[LabelFailedValues] != "" {
		f.Failed = &Failure{ChartDigest: l[LabelFailedChart], ValuesDigest: l[LabelFailedValues], Cause: Cause(l[LabelFailureCause]),
			Count: max(labelInt(l, LabelFailures), 1)}
		if at, err := strconv.ParseInt(l[LabelFailedAt], 10, 64); err == nil {
			f.Failed.At = time.Unix(at, 0).UTC()
		}
	}
	return f
}

// Holds reports whether f holds back the (chart, values) of want.
func (f *Failure) Holds(want Desired) bool {
	return f != nil && f.ChartDigest == want.ChartDigest && f.ValuesDigest == want.ValuesDigest
}

// Equal reports whether f and g are the same facts, wherever written (nil: none known), as
// their labels say them (times to the second).
func (f *Facts) Equal(g *Facts) bool {
	if f == nil || g == nil {
		return f == g
	}
	if f.RollbackTo != g.RollbackTo || f.ReconcileAt != g.ReconcileAt || f.ResetAt != g.ResetAt {
		return false
	}
	if (f.Applied == nil) != (g.Applied == nil) || (f.Applied != nil && *f.Applied != *g.Applied) {
		return false
	}
	a, b := f.Failed, g.Failed
	if a == nil || b == nil {
		return a == b
	}
	return a.ChartDigest == b.ChartDigest && a.ValuesDigest == b.ValuesDigest && a.Cause == b.Cause &&
		max(a.Count, 1) == max(b.Count, 1) && a.At.Unix() == b.At.Unix() && a.At.IsZero() == b.At.IsZero()
}

// FactsPatch is the metadata merge patch that gives the record of revision version exactly
// the facts f.
func FactsPatch(f Facts, version int) map[string]any {
	return LabelsPatch(FactLabels, f.Labels(version))
}

// LabelsPatch is the metadata merge patch that gives an object exactly the labels want among
// keys: those in want set to their value, the other keys removed.
func LabelsPatch(keys []string, want map[string]string) map[string]any {
	labels := make(map[string]any, len(keys))
	for _, k := range keys {
		if v, ok := want[k]; ok {
			labels[k] = v
		} else {
			labels[k] = nil
		}
	}
	return map[string]any{"metadata": map[string]any{"labels": labels}}
}

// WriteFacts gives the record of revision version of release name exactly the facts f, in
// one patch of its labels (its payload untouched), read before the cache shows it as every
// write of the driver is (see Track).
func (d *Driver) WriteFacts(ctx context.Context, name string, version int, f Facts) error {
	patch, err := json.Marshal(FactsPatch(f, version))
	if err != nil {
		return err
	}
	_, err = d.impl.Patch(ctx, RecordName(name, version), types.MergePatchType, patch, metav1.PatchOptions{})
	return err
}

// Desired identifies the release a CR wants.
type Desired struct {
	OwnerUID     string
	ChartDigest  string // LabelDigest form
	ValuesDigest string
	// Generation of the CR now, and Applied, what rudder's newest own revision was made from
	// (nil: unknown): a revision rudder did not make is kept while the two agree.
	Generation int64
	Applied    *Applied
}

// Applied is what rudder's newest install or upgrade was made from.
type Applied struct {
	Generation  int64
	ChartDigest string // LabelDigest form
}
