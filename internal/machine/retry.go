package machine

import (
	"math"
	"math/rand/v2"
	"time"

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
// doubled for each failure after the first, never more than retryCap.
func retryBackoff(failures int) time.Duration {
	d := float64(retryBase) * math.Exp2(float64(max(failures, 1)-1))
	return time.Duration(min(d, float64(retryCap)))
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
