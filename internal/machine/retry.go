package machine

import (
	"math"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	rstatus "github.com/rudder-operator/rudder/api/status"
)

// Retries (a watch's remediation.retries): a failed install or upgrade of a (chart, values) is
// tried again after an exponential back-off, until it has failed retries+1 times in a row; then
// it is held back, Stalled, like a failure without retries. The count and the time of the last
// failure are among the release's facts (facts.go; status.release.failed reports them), so a
// restart neither forgets nor repeats a retry, and every retry is one install or upgrade (with
// its remedy: the removal of a failed install, the rollback of a failed upgrade), never a loop.
// In the plan a retry is two facts of the situation: a failure with retries left ends the pass
// waiting (plan.EndRetrying) instead of held back, and a retry that is due lets the pair go for
// one more try.

// retryBase and retryCap bound the back-off: retryBase after the first failure, doubling after
// each, never more than retryCap.
const (
	retryBase = 5 * time.Second
	retryCap  = 5 * time.Minute
)

// retryBackoff is how long after its failures-th failure a pair is tried again: retryBase,
// doubled for each failure after the first, never more than retryCap. It is apimachinery's
// exponential back-off stepped once per failure from the durable count (the release's facts),
// not a back-off held in memory, so a restart neither forgets nor repeats a step.
func retryBackoff(failures int) time.Duration {
	b := wait.Backoff{Duration: retryBase, Factor: 2, Steps: math.MaxInt32, Cap: retryCap}
	d := b.Step()
	for i := 1; i < failures && d < retryCap; i++ {
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

// failures is how often f's pair has failed in a row (a record rudder made before 647f429,
// without a count: once).
func failures(f *failure) int { return max(f.failed.Failures, 1) }

// retriesLeft reports whether the failure f (nil: none) is tried again, with the watch's
// remediation.retries.
func retriesLeft(f *failure, retries int) bool {
	return f != nil && retriable(f.failed.Reason) && failures(f) <= retries
}

// Jitter spreads periodic passes of many CRs over ±10% of the period: apimachinery's Jitter,
// which adds up to a factor on top, from 0.9 of d by up to 2/9 of that.
func Jitter(d time.Duration) time.Duration {
	if d <= 0 {
		return 0
	}
	return wait.Jitter(d*9/10, 2.0/9)
}

// periodic is how long from now until a CR's next periodic pass: the period jittered (see
// Jitter), then rounded up onto the clock's grid of a twelfth of the period (5 s of a minute),
// so that the passes of the CRs whose turns fall within one step of it run together. An idle
// process then wakes once a step for a batch, not once for each CR: at 300 CRs and a 1-minute
// period, passes 200 ms apart cost twice the CPU of passes run back to back (docs/bench-archive.md,
// "periodic passes on a grid"). The jitter still spreads the fleet over the period's twelve steps, and a pass
// comes at most a twelfth of the period later than the jitter alone would have it.
func periodic(now time.Time, period time.Duration) time.Duration {
	d := Jitter(period)
	step := period / 12
	if step <= 0 {
		return d
	}
	return now.Add(d).Truncate(step).Add(step).Sub(now)
}
