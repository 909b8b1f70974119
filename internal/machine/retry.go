package machine

import (
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	rstatus "github.com/rudder-operator/rudder/api/status"
	"github.com/rudder-operator/rudder/internal/records"
)

// Retries (a watch's remediation.retries): a failed install or upgrade of a (chart, values) is
// tried again after an exponential back-off, until it has failed retries+1 times in a row;
// then it is held back, Stalled, like a failure without retries. The count and the time of
// the last failure are among the release's facts (facts.go; status.release.failed reports
// them), so a restart neither forgets nor repeats a retry, and every retry is one install or upgrade (with its remedy: the removal of a failed
// install, the rollback of a failed upgrade), never a loop. In the plan a retry is two facts
// of the situation: a failure with retries left ends the pass waiting (plan.EndRetrying) instead
// of held back, and a retry that is due lets the pair go for one more try.

// retryBase and retryCap bound the back-off: retryBase after the first failure, doubling after
// each, never more than retryCap.
const (
	retryBase = 5 * time.Second
	retryCap  = 5 * time.Minute
)

// retryBackoff is how long after its failures-th failure a pair is tried again: the
// failures-th step of apimachinery's back-off from retryBase, doubling, capped at retryCap.
func retryBackoff(failures int) time.Duration {
	b := wait.Backoff{Duration: retryBase, Factor: 2, Steps: max(failures, 1), Cap: retryCap}
	var d time.Duration
	for range max(failures, 1) {
		d = b.Step()
	}
	return d
}

// retriable reports whether a failure of reason is retried: an install's or an upgrade's. A
// chart that breaks its confinement fails the same way every time, and failed tests run again
// on the next revision.
func retriable(reason string) bool {
	return reason == rstatus.ReasonInstallFailed || reason == rstatus.ReasonUpgradeFailed
}

// failure is a held-back failure as status.release.failed reports it, with the reason
// Released gave.
type failure struct {
	reason string
	failed rstatus.FailedRelease
}

// failures is how often f's pair has failed in a row (a record of an older rudder, without a
// count: once).
func failures(f *failure) int { return max(f.failed.Failures, 1) }

// retriesLeft reports whether the failure f (nil: none) is tried again, with the watch's
// remediation.retries.
func retriesLeft(f *failure, retries int) bool {
	return f != nil && retriable(f.failed.Reason) && failures(f) <= retries
}

// retriesLeft reports whether the failure f (nil: none) is tried again.
func (p *pass) retriesLeft(f *failure) bool { return retriesLeft(f, p.w.Watch.Retries()) }

// retryIn is how long until the retry of f is due (≤ 0: due).
func (p *pass) retryIn(f *failure) time.Duration {
	if f.failed.LastFailure == nil {
		return 0
	}
	return f.failed.LastFailure.Add(retryBackoff(failures(f))).Sub(p.w.Clock.Now())
}

// retryDue reports whether the held-back failure f of an earlier pass is retried now.
func (p *pass) retryDue(f *failure) bool { return p.retriesLeft(f) && p.retryIn(f) <= 0 }

// recordedFailure is the failure this pass recorded last (nil: none).
func (o *outcome) recordedFailure() *failure {
	for i := len(o.records) - 1; i >= 0; i-- {
		if f := o.records[i].failed; f != nil {
			return f
		}
	}
	return nil
}

// retryLater ends a pass on a failure with retries left: waiting for its back-off, Stalled
// False, Released as the failure left it.
func (p *pass) retryLater(o *outcome) result {
	f := o.recordedFailure()
	if f == nil {
		f, _ = p.heldBackFailure()
	}
	wait := max(p.retryIn(f), time.Second)
	n, retries := failures(f), p.w.Watch.Retries()
	msg := fmt.Sprintf("chart %s with values %s failed %d of at most %d times (remediation.retries %d); trying again in %s: %s",
		records.DisplayDigest(p.want.ChartDigest), records.DisplayDigest(p.want.ValuesDigest), n, retries+1, retries, wait.Round(time.Second), f.failed.Message)
	res := result{verdict: blocked, phase: phaseRetrying, reason: rstatus.ReasonRetryScheduled, message: msg, requeue: wait,
		record: record{failed: f}}
	if c := p.cond(rstatus.TypeReleased); o.released == nil && (c == nil || c.Status != metav1.ConditionFalse) {
		res.released = &condition{metav1.ConditionFalse, f.reason, msg}
	}
	return res
}
