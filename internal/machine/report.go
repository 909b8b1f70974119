package machine

import (
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	rstatus "github.com/rudder-operator/rudder/api/status"
	"github.com/rudder-operator/rudder/internal/helm"
	"github.com/rudder-operator/rudder/internal/records"
	"github.com/rudder-operator/rudder/internal/watches"
)

// errStalled marks passes that cannot make progress until the CR, the chart or the cluster
// changes (returned as a reconcile.TerminalError); the Stalled condition says why.
var errStalled = errors.New("stalled")

const (
	phasePaused     phase = "Paused"     // rudder.dev/paused: no action
	phaseInSync     phase = "InSync"     // deployed from the current spec and chart
	phaseRolledBack phase = "RolledBack" // a rollback rudder did not make from the spec, kept
	phaseHeld       phase = "Held"       // a pre-release hook said "not now"
	phaseLocked     phase = "Locked"     // waiting for someone else's pending operation
	phaseStalled    phase = "Stalled"    // nothing to do until the CR, the chart or the cluster changes
	phaseFailed     phase = "Failed"     // a release action failed and is retried with back-off
	phaseRetrying   phase = "Retrying"   // a failed (chart, values) waits for its next try (remediation.retries)
)

// stall ends the pass on something only a change to the CR, the chart or the cluster can
// clear; Released says the same.
func (o *outcome) stall(reason, msg string) {
	o.phase, o.reason, o.message, o.err = phaseStalled, reason, msg, nil
	o.released = &condition{metav1.ConditionFalse, reason, msg}
}

// fail ends the pass on a transient failure: retried with back-off.
func (o *outcome) fail(reason string, err error) {
	o.reason, o.message, o.err = reason, err.Error(), err
}

func (o *outcome) note(typ, reason, action, msg string) {
	o.events = append(o.events, note{typ: typ, reason: reason, action: action, message: msg})
}

func (o *outcome) requeueIn(d time.Duration) {
	if d > 0 && (o.requeue == 0 || d < o.requeue) {
		o.requeue = d
	}
}

// settles reports whether the pass goes on to the release's objects and the post-release
// hooks: it ended on a revision (or a hold) without failing.
func (o *outcome) settles() bool {
	return o.err == nil && (o.phase == phaseInSync || o.phase == phaseRolledBack || o.phase == phaseHeld)
}

// report is the only place that sets conditions and observedGeneration: it turns the
// outcome into them, records the Events and the rudder_release_state gauge, and maps the
// outcome to the controller-runtime Result. Its contract is controller-runtime's: a non-nil
// error is retried with back-off (a reconcile.TerminalError never is) and comes with an empty
// Result.
func (p *pass) report(o *outcome) (reconcile.Result, error) {
	p.writeRelease(o)
	p.reportChartAndPause(o)
	for _, n := range o.events {
		p.event(n)
	}
	p.setCondition(rstatus.TypeReleased, o.released)
	for _, typ := range slices.Sorted(maps.Keys(o.conditions)) {
		p.setCondition(typ, o.conditions[typ])
	}
	if p.w.Watch.DriftMode() != watches.DriftWarn {
		meta.RemoveStatusCondition(&p.st.Conditions, rstatus.TypeDrifted) // set in warn mode only
	}
	ph := o.phase
	if ph == "" || (o.err != nil && o.reason == rstatus.ReasonForbidden) {
		ph = phaseFailed
	}
	p.w.Memory.recordPhase(p.key, ph)

	switch {
	case o.phase == phasePaused:
		p.set(rstatus.TypeReconciling, metav1.ConditionFalse, rstatus.ReasonPaused, "paused")
		return reconcile.Result{}, nil
	case o.phase == phaseStalled:
		p.setKstatus(metav1.ConditionFalse, metav1.ConditionFalse, metav1.ConditionTrue, o.reason, o.message)
		p.st.ObservedGeneration = p.gen
		return reconcile.Result{}, reconcile.TerminalError(fmt.Errorf("%w: %s: %s", errStalled, o.reason, o.message))
	case o.err != nil:
		// Retried, so not stalled.
		p.set(rstatus.TypeReady, metav1.ConditionFalse, o.reason, o.message)
		p.set(rstatus.TypeReconciling, metav1.ConditionTrue, o.reason, o.message)
		p.set(rstatus.TypeStalled, metav1.ConditionFalse, o.reason, "")
		return reconcile.Result{}, o.err
	case o.phase == phaseLocked || o.phase == phaseRetrying:
		p.setKstatus(metav1.ConditionFalse, metav1.ConditionTrue, metav1.ConditionFalse, o.reason, o.message)
		return reconcile.Result{RequeueAfter: o.requeue}, nil
	}
	p.reportObjects(o)
	p.st.ObservedGeneration = p.gen
	o.requeueIn(periodic(p.w.Clock.Now(), p.w.Period))
	return reconcile.Result{RequeueAfter: o.requeue}, nil
}

// reportObjects sets Ready, Reconciling and Stalled for a pass that completed: from the
// objects of the revision it ended on, or, for a hold with no release, from the hold.
func (p *pass) reportObjects(o *outcome) {
	r := o.ready
	switch {
	case r == nil:
		p.setKstatus(metav1.ConditionFalse, metav1.ConditionTrue, metav1.ConditionFalse, o.reason, o.message)
	case len(r.failed) > 0:
		p.setKstatus(metav1.ConditionFalse, metav1.ConditionFalse, metav1.ConditionTrue, rstatus.ReasonObjectFailed,
			strings.Join(r.failed, "; "))
	case len(r.waiting) > 0:
		msg := "waiting for " + strings.Join(r.waiting, "; ")
		p.set(rstatus.TypeReady, metav1.ConditionFalse, rstatus.ReasonProgressing, msg)
		p.set(rstatus.TypeReconciling, metav1.ConditionTrue, rstatus.ReasonProgressing, msg)
		p.set(rstatus.TypeStalled, metav1.ConditionFalse, o.reason, "")
	default:
		msg := fmt.Sprintf("revision %d: %d objects ready", r.revision, r.count)
		p.set(rstatus.TypeReady, metav1.ConditionTrue, rstatus.ReasonObjectsReady, msg)
		p.set(rstatus.TypeReconciling, metav1.ConditionFalse, rstatus.ReasonObjectsReady, msg)
		p.set(rstatus.TypeStalled, metav1.ConditionFalse, o.reason, "")
	}
}

// reportChartAndPause sets ChartReady (with an Event when the chart on disk breaks) and
// Paused (with an Event when it is lifted).
func (p *pass) reportChartAndPause(o *outcome) {
	if o.phase == phasePaused {
		p.set(rstatus.TypePaused, metav1.ConditionTrue, rstatus.ReasonPaused,
			AnnotationPaused+` is "true": no release actions until it is removed`)
		return
	}
	if c := p.cond(rstatus.TypePaused); c != nil && c.Status == metav1.ConditionTrue {
		p.set(rstatus.TypePaused, metav1.ConditionFalse, rstatus.ReasonResumed, AnnotationPaused+" removed")
		p.event(note{corev1.EventTypeNormal, rstatus.ReasonResumed, "Resume", "reconciling again"})
	}
	if p.snap == nil {
		return
	}
	if p.chartErr != nil {
		if c := p.cond(rstatus.TypeChartReady); c == nil || c.Status != metav1.ConditionFalse {
			p.event(note{corev1.EventTypeWarning, rstatus.ReasonChartInvalid, "LoadChart", p.chartErr.Error()})
		}
		p.set(rstatus.TypeChartReady, metav1.ConditionFalse, rstatus.ReasonChartInvalid,
			fmt.Sprintf("%v (still using the last good version, digest %s)", p.chartErr, records.DisplayDigest(p.snap.Digest)))
		return
	}
	p.set(rstatus.TypeChartReady, metav1.ConditionTrue, rstatus.ReasonChartLoaded,
		fmt.Sprintf("chart %s, digest %s", helm.ChartRef(p.snap.Chart), records.DisplayDigest(p.snap.Digest)))
}

// setKstatus sets kstatus's three conditions with one reason and message (Stalled=False
// carries no message).
func (p *pass) setKstatus(ready, reconciling, stalled metav1.ConditionStatus, reason, msg string) {
	p.set(rstatus.TypeReady, ready, reason, msg)
	p.set(rstatus.TypeReconciling, reconciling, reason, msg)
	stalledMsg := msg
	if stalled == metav1.ConditionFalse {
		stalledMsg = ""
	}
	p.set(rstatus.TypeStalled, stalled, reason, stalledMsg)
}

func (p *pass) set(typ string, s metav1.ConditionStatus, reason, msg string) {
	meta.SetStatusCondition(&p.st.Conditions, metav1.Condition{
		Type: typ, Status: s, Reason: reason, Message: truncate(msg, 4000), ObservedGeneration: p.gen,
	})
}

func (p *pass) setCondition(typ string, c *condition) {
	if c != nil {
		p.set(typ, c.status, c.reason, c.message)
	}
}

// event records an Event on the CR and logs the same line (with the CR and the release), so
// that every release action and failure is in both.
func (p *pass) event(n note) {
	p.w.Recorder.Eventf(p.obj, nil, n.typ, n.reason, n.action, "%s", n.message)
	// "release" is added per line, not with WithValues per pass: zap encodes WithValues eagerly,
	// a cost every idle pass would pay for lines it rarely writes.
	p.log.Info(n.message, "release", p.relName, "event", n.typ, "reason", n.reason, "action", n.action)
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n-3] + "..."
}

// Jitter spreads periodic passes of many CRs over ±10% of the period.
func Jitter(d time.Duration) time.Duration {
	if d <= 0 {
		return 0
	}
	return d + time.Duration((rand.Float64()*0.2-0.1)*float64(d))
}

// periodic is how long from now until a CR's next periodic pass: the period jittered (see
// Jitter), then rounded up onto the clock's grid of a twelfth of the period (5 s of a minute),
// so that the passes of the CRs whose turns fall within one step of it run together. An idle
// process then wakes once a step for a batch, not once for each CR: at 300 CRs and a 1-minute
// period, passes 200 ms apart cost twice the CPU of passes run back to back (docs/bench.md,
// session 23). The jitter still spreads the fleet over the period's twelve steps, and a pass
// comes at most a twelfth of the period later than the jitter alone would have it.
func periodic(now time.Time, period time.Duration) time.Duration {
	d := Jitter(period)
	step := period / 12
	if step <= 0 {
		return d
	}
	return now.Add(d).Truncate(step).Add(step).Sub(now)
}
