package machine

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	rstatus "github.com/rudder-operator/rudder/api/status"
	"github.com/rudder-operator/rudder/internal/helm"
	"github.com/rudder-operator/rudder/internal/plan"
	"github.com/rudder-operator/rudder/internal/records"
	"github.com/rudder-operator/rudder/internal/release"
)

// rollback returns the release to its last deployed revision after a failed upgrade (or the
// failed tests of a revision, with test.onFailure: rollback): the remedy plan.Next chooses for a
// (chart, values) that failed, unless the watch turns it off. The pair stays held back.
type rollback struct {
	to int
	// cause is the failure this pass met (nil: one an earlier pass recorded).
	cause *step
}

func (rollback) name() plan.Action { return plan.Rollback }

func (a rollback) run(ctx context.Context, e *env, _ observed) result {
	msg, forbidden, reason := "", false, rstatus.ReasonUpgradeFailed
	why := fmt.Sprintf("the upgrade to generation %d failed", e.gen)
	if a.cause != nil {
		msg, forbidden = a.cause.result.message, a.cause.result.forbidden
		if a.cause.action.name() == plan.Test {
			reason, why = rstatus.ReasonTestFailed, "the tests of the newest revision failed"
		}
	} else if f := e.held; f != nil {
		msg = fmt.Sprintf("upgrading release %s: %s", e.release, f.failed.Message)
	}
	desc := fmt.Sprintf("rudder rollback to revision %d: %s", a.to, why)
	replaced, now, err := rollbackTo(ctx, e, a.to, desc)
	if err != nil {
		return result{verdict: retry, reason: rstatus.ReasonRollbackFailed, err: err, call: callFailed,
			notes: append(replaced, note{corev1.EventTypeWarning, rstatus.ReasonRollbackFailed, "Rollback",
				fmt.Sprintf("rolling back %s to revision %d: %v", e.release, a.to, err)}),
			released: &condition{metav1.ConditionFalse, rstatus.ReasonRollbackFailed, fmt.Sprintf("%s; rollback to revision %d failed: %v", msg,
				a.to, err)}}
	}
	h := records.HeadOf(now)
	res := result{verdict: failed, forbidden: forbidden, call: callOK, after: &observed{head: h, rel: now},
		record: record{revision: &revisionRecord{number: now.Version, chart: now.Chart.Ref(), chartDigest: h.ChartDigest,
			valuesDigest: h.ValuesDigest, rolledBackTo: a.to}}}
	res.message = fmt.Sprintf("%s; rolled back to revision %d (now revision %d)", msg, a.to, now.Version)
	if forbidden {
		res.reason, res.notes = rstatus.ReasonForbidden, replaced
		return res
	}
	res.reason = reason
	if a.cause != nil && retriesLeft(a.cause.result.record.failed, e.watch.Policies().Retries()) {
		res.message += "; tried again after a back-off (remediation.retries)"
	} else {
		res.message += "; not retried until the spec or the chart changes"
	}
	res.notes = append(replaced, note{corev1.EventTypeNormal, rstatus.ReasonRolledBack, "Rollback", res.message})
	res.released = &condition{metav1.ConditionFalse, rstatus.ReasonRolledBack, res.message}
	return res
}

// rollbackTo rolls e's release back to revision to, as a new revision described by desc, and
// returns it; with the watch's upgrade.force, objects a forced upgrade replaced are replaced
// back, and the notes are the Events that say so.
func rollbackTo(ctx context.Context, e *env, to int, desc string) ([]note, *release.Release, error) {
	req := &helm.RollbackRequest{Name: e.release, To: to, MaxHistory: e.watch.Policies().HistoryLimit(),
		Description: desc, Force: e.watch.Policies().Forces()}
	made, err := e.helm.Actions.Rollback(ctx, e.scope, req)
	notes := make([]note, 0, len(req.Replaced))
	for _, obj := range req.Replaced {
		notes = append(notes, note{corev1.EventTypeNormal, rstatus.ReasonReplaced, "Rollback",
			fmt.Sprintf("replaced %s (deleted and created) in the rollback to revision %d: its update changes an immutable field (upgrade.force)",
				obj, to)})
	}
	return notes, made, err
}

// RollbackValue is a value of AnnotationRollbackTo that asks for revision rev: "<rev>@<at>",
// at to the nanosecond, so that each request is one of its own (a value is acted on once),
// also when an earlier one asked for the same revision. `rudder rollback` writes it.
func RollbackValue(rev int, at time.Time) string {
	return strconv.Itoa(rev) + "@" + at.UTC().Format(time.RFC3339Nano)
}

// RollbackRevision is the revision a value of AnnotationRollbackTo asks for: "<rev>", or
// "<rev>@<anything>" (RollbackValue).
func RollbackRevision(v string) (int, error) {
	rev, _, _ := strings.Cut(v, "@")
	return strconv.Atoi(strings.TrimSpace(rev))
}

// requestRollback acts on a new value of the rollback-to annotation: a rollback to that
// revision (a new revision whose description names the request), or, for a revision the
// history does not hold, a refusal. Either way the RollbackRequest condition and an Event say
// what became of it. Only a transient failure leaves the value to be tried again.
type requestRollback struct {
	value string
	// target is the revision value asks for, as observe read it (nil: none of the history).
	target *records.Head
}

func (requestRollback) name() plan.Action { return plan.RequestRollback }

func (a requestRollback) run(ctx context.Context, e *env, obs observed) result {
	v, target := a.value, a.target
	to, _ := RollbackRevision(v)
	// Handled, whatever becomes of it (the pass goes on from the release as it was).
	res := result{verdict: succeeded, after: &obs, record: record{rollbackRequest: &v}}
	refused := func(reason, msg string) result {
		res.notes = []note{{corev1.EventTypeWarning, reason, "Rollback", msg}}
		res.conditions = map[string]*condition{rstatus.TypeRollbackRequest: {metav1.ConditionFalse, reason, msg}}
		return res
	}
	if target == nil || target.OwnerUID != e.want.OwnerUID {
		return refused(rstatus.ReasonRollbackRejected,
			fmt.Sprintf("%s=%q names no revision of release %s (see helm history %s -n %s); nothing was done",
				AnnotationRollbackTo, v, e.release, e.release, e.key.Namespace))
	}
	desc := fmt.Sprintf("rudder rollback to revision %d: requested by %s=%q", to, AnnotationRollbackTo, v)
	replaced, _, err := rollbackTo(ctx, e, to, desc)
	if err != nil {
		if isTransient(err) {
			// This value is tried again.
			return result{verdict: retry, reason: rstatus.ReasonRollbackFailed, notes: replaced, call: callFailed,
				err: fmt.Errorf("rolling back %s to revision %d: %w", e.release, to, err)}
		}
		res := refused(rstatus.ReasonRollbackFailed, fmt.Sprintf("rolling back %s to revision %d as %s asks: %v", e.release, to,
			AnnotationRollbackTo, err))
		res.notes, res.call = append(replaced, res.notes...), callFailed
		return res
	}
	res.call = callOK
	msg := fmt.Sprintf("rolled back to revision %d as %s=%q asks; it holds until the spec or the chart changes", to, AnnotationRollbackTo, v)
	res.notes = append(replaced, note{corev1.EventTypeNormal, rstatus.ReasonRolledBack, "Rollback", msg})
	res.conditions = map[string]*condition{rstatus.TypeRollbackRequest: {metav1.ConditionTrue, rstatus.ReasonRolledBack, msg}}
	// The release changed under the observation: the pass reads it again, and decides as for
	// any rollback (the newest revision, not made from the spec).
	res.after = nil
	return res
}

// rolloutRollback returns a release on the chart of a halted rollout (onHalt rollback) to its
// newest revision of an earlier chart.
type rolloutRollback struct {
	to int
	// rollout names the Rollout that halted.
	rollout string
}

func (rolloutRollback) name() plan.Action { return plan.RolloutRollback }

func (a rolloutRollback) run(ctx context.Context, e *env, _ observed) result {
	name := a.rollout
	desc := fmt.Sprintf("rudder rollback to revision %d: rollout %s halted", a.to, name)
	replaced, _, err := rollbackTo(ctx, e, a.to, desc)
	if err != nil {
		return result{verdict: retry, reason: rstatus.ReasonRollbackFailed, err: fmt.Errorf("rolling %s back to revision %d: %w", e.release,
			a.to, err), call: callFailed,
			notes: replaced}
	}
	msg := fmt.Sprintf("rolled back to revision %d: rollout %s halted (onHalt rollback)", a.to, name)
	return result{verdict: succeeded, call: callOK, notes: append(replaced, note{"Normal", rstatus.ReasonRolledBack, "Rollback", msg})}
}
