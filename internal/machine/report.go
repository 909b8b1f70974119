package machine

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	rstatus "github.com/rudder-operator/rudder/api/status"
	"github.com/rudder-operator/rudder/internal/helm"
	"github.com/rudder-operator/rudder/internal/plan"
	"github.com/rudder-operator/rudder/internal/records"
	"github.com/rudder-operator/rudder/internal/release"
	"github.com/rudder-operator/rudder/internal/watches"
)

// errStalled marks passes that cannot make progress until the CR, the chart or the cluster
// changes (returned as a reconcile.TerminalError); the Stalled condition says why.
var errStalled = errors.New("stalled")

// reporter is the last step of a pass: it turns the outcome into the status the pass writes
// (st), the Events, the rudder_release_state gauge and the controller-runtime Result.
type reporter struct {
	sub *subject
	obs *observation
	st  *rstatus.Common
}

// report is the only place that sets conditions and observedGeneration: it turns the
// outcome into them, records the Events and the rudder_release_state gauge, and maps the
// outcome to the controller-runtime Result. Its contract is controller-runtime's: a non-nil
// error is retried with back-off (a reconcile.TerminalError never is) and comes with an empty
// Result.
func (rp reporter) report(o *outcome) (reconcile.Result, error) {
	writeRelease(rp.st, rp.obs.relName, o.records)
	rp.reportInventory(o)
	rp.reportChartAndPause(o)
	for _, n := range o.events {
		rp.sub.event(n, rp.obs.relName)
	}
	rp.setCondition(rstatus.TypeReleased, o.released)
	for _, typ := range slices.Sorted(maps.Keys(o.conditions)) {
		rp.setCondition(typ, o.conditions[typ])
	}
	if rp.sub.w.Watch.Policies().DriftMode() != watches.DriftWarn {
		meta.RemoveStatusCondition(&rp.st.Conditions, rstatus.TypeDrifted) // set in warn mode only
	}
	ph := o.phase
	if ph == "" || (o.err != nil && o.reason == rstatus.ReasonForbidden) {
		ph = phaseFailed
	}
	rp.sub.w.Memory.recordPhase(rp.sub.key, ph)

	switch {
	case o.phase == phasePaused:
		rp.set(rstatus.TypeReconciling, metav1.ConditionFalse, rstatus.ReasonPaused, "paused")
		return reconcile.Result{}, nil
	case o.phase == phaseStalled:
		rp.setKstatus(metav1.ConditionFalse, metav1.ConditionFalse, metav1.ConditionTrue, o.reason, o.message)
		rp.st.ObservedGeneration = rp.sub.gen
		return reconcile.Result{}, reconcile.TerminalError(fmt.Errorf("%w: %s: %s", errStalled, o.reason, o.message))
	case o.err != nil:
		// Retried, so not stalled.
		rp.set(rstatus.TypeReady, metav1.ConditionFalse, o.reason, o.message)
		rp.set(rstatus.TypeReconciling, metav1.ConditionTrue, o.reason, o.message)
		rp.set(rstatus.TypeStalled, metav1.ConditionFalse, o.reason, "")
		return reconcile.Result{}, o.err
	case o.phase == phaseLocked || o.phase == phaseRetrying:
		rp.setKstatus(metav1.ConditionFalse, metav1.ConditionTrue, metav1.ConditionFalse, o.reason, o.message)
		return reconcile.Result{RequeueAfter: o.requeue}, nil
	case o.phase == phaseWaiting:
		// A dependency's change takes the CR again; the periodic pass stays the backstop.
		rp.setKstatus(metav1.ConditionFalse, metav1.ConditionTrue, metav1.ConditionFalse, o.reason, o.message)
		rp.st.ObservedGeneration = rp.sub.gen
		o.requeueIn(periodic(rp.sub.w.Clock.Now(), rp.sub.w.Period))
		return reconcile.Result{RequeueAfter: o.requeue}, nil
	}
	rp.reportObjects(o)
	rp.st.ObservedGeneration = rp.sub.gen
	o.requeueIn(periodic(rp.sub.w.Clock.Now(), rp.sub.w.Period))
	if h := o.head; h != nil && h.Status == release.StatusDeployed && h.MadeByRudder() {
		// The next run of the tests (test.interval), at least a second on.
		interval := rp.sub.w.Watch.Policies().Tests().Interval()
		in, again := testsIn(h, interval, rp.sub.w.Clock)
		if o.taken[plan.Test] && interval > 0 {
			in, again = interval, true // the run of this pass, which h does not show yet
		}
		if again {
			o.requeueIn(max(in, time.Second))
		}
	}
	return reconcile.Result{RequeueAfter: o.requeue}, nil
}

// reportObjects sets Ready, Reconciling and Stalled for a pass that completed: from the
// objects of the revision it ended on, or, for a hold with no release, from the hold.
func (rp reporter) reportObjects(o *outcome) {
	r := o.ready
	switch {
	case r == nil:
		rp.setKstatus(metav1.ConditionFalse, metav1.ConditionTrue, metav1.ConditionFalse, o.reason, o.message)
	case len(r.failed) > 0:
		rp.setKstatus(metav1.ConditionFalse, metav1.ConditionFalse, metav1.ConditionTrue, rstatus.ReasonObjectFailed,
			strings.Join(r.failed, "; "))
	case len(r.waiting) > 0:
		msg := "waiting for " + strings.Join(r.waiting, "; ")
		rp.set(rstatus.TypeReady, metav1.ConditionFalse, rstatus.ReasonProgressing, msg)
		rp.set(rstatus.TypeReconciling, metav1.ConditionTrue, rstatus.ReasonProgressing, msg)
		rp.set(rstatus.TypeStalled, metav1.ConditionFalse, o.reason, "")
	default:
		msg := fmt.Sprintf("revision %d: %d objects ready", r.revision, r.count)
		rp.set(rstatus.TypeReady, metav1.ConditionTrue, rstatus.ReasonObjectsReady, msg)
		rp.set(rstatus.TypeReconciling, metav1.ConditionFalse, rstatus.ReasonObjectsReady, msg)
		rp.set(rstatus.TypeStalled, metav1.ConditionFalse, o.reason, "")
	}
}

// reportChartAndPause sets ChartReady (with an Event when the chart on disk breaks) and
// Paused (with an Event when it is lifted).
func (rp reporter) reportChartAndPause(o *outcome) {
	if o.phase == phasePaused {
		rp.set(rstatus.TypePaused, metav1.ConditionTrue, rstatus.ReasonPaused,
			AnnotationPaused+` is "true": no release actions until it is removed`)
		return
	}
	if c := rp.sub.cond(rstatus.TypePaused); c != nil && c.Status == metav1.ConditionTrue {
		rp.set(rstatus.TypePaused, metav1.ConditionFalse, rstatus.ReasonResumed, AnnotationPaused+" removed")
		rp.sub.event(note{corev1.EventTypeNormal, rstatus.ReasonResumed, "Resume", "reconciling again"}, rp.obs.relName)
	}
	if rp.obs.snap == nil {
		return
	}
	if rp.obs.chartErr != nil {
		if c := rp.sub.cond(rstatus.TypeChartReady); c == nil || c.Status != metav1.ConditionFalse {
			rp.sub.event(note{corev1.EventTypeWarning, rstatus.ReasonChartInvalid, "LoadChart", rp.obs.chartErr.Error()}, rp.obs.relName)
		}
		rp.set(rstatus.TypeChartReady, metav1.ConditionFalse, rstatus.ReasonChartInvalid,
			fmt.Sprintf("%v (still using the last good version, digest %s)", rp.obs.chartErr, records.DisplayDigest(rp.obs.snap.Digest)))
		return
	}
	rp.set(rstatus.TypeChartReady, metav1.ConditionTrue, rstatus.ReasonChartLoaded,
		fmt.Sprintf("chart %s, digest %s", helm.ChartRef(rp.obs.snap.Chart), records.DisplayDigest(rp.obs.snap.Digest)))
}

// setKstatus sets kstatus's three conditions with one reason and message (Stalled=False
// carries no message).
func (rp reporter) setKstatus(ready, reconciling, stalled metav1.ConditionStatus, reason, msg string) {
	rp.set(rstatus.TypeReady, ready, reason, msg)
	rp.set(rstatus.TypeReconciling, reconciling, reason, msg)
	stalledMsg := msg
	if stalled == metav1.ConditionFalse {
		stalledMsg = ""
	}
	rp.set(rstatus.TypeStalled, stalled, reason, stalledMsg)
}

func (rp reporter) set(typ string, s metav1.ConditionStatus, reason, msg string) {
	meta.SetStatusCondition(&rp.st.Conditions, metav1.Condition{
		Type: typ, Status: s, Reason: reason, Message: truncate(msg, 4000), ObservedGeneration: rp.sub.gen,
	})
}

func (rp reporter) setCondition(typ string, c *condition) {
	if c != nil {
		rp.set(typ, c.status, c.reason, c.message)
	}
}
