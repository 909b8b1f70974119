package machine

import (
	"time"

	"k8s.io/utils/clock"

	"github.com/rudder-operator/rudder/internal/helm"
	"github.com/rudder-operator/rudder/internal/plan"
	"github.com/rudder-operator/rudder/internal/records"
	"github.com/rudder-operator/rudder/internal/release"
)

// The pass decides in two pure steps: records.DetermineState classifies the release's newest
// revision against what the CR wants (observer.classify), and plan.Next maps that state, with
// the few facts of a situation, to the one action to take now, or to how the pass ends. The
// pass runs the action, observes the release as the action left it, and asks again
// (actor.walk): an install that failed is followed by the removal of what it left, an upgrade
// that failed by a rollback, an unlock by the upgrade it unblocks. An action is taken at most
// once per pass, so every pass ends.

// ForeignPendingGrace is how long a pending revision that rudder did not start is left to the
// operation that may still be running it (a person's helm rollback or upgrade, whose --timeout
// defaults to this) before rudder unlocks it as dead. rudder's own pending revisions are
// unlocked at once: rudder runs one operation per release, so one it finds was started by a
// process that is gone.
const ForeignPendingGrace = 5 * time.Minute

// situation is what plan.Next decides from, for sub as observe found it (obs) and its release
// as rel has it (with what observer.closer read for it), after the steps of o. It reads
// nothing but the clock.
func situation(sub *subject, obs *observation, rel observed, o *outcome) plan.Situation {
	p, clk := sub.w.Watch.Policies(), sub.w.Clock
	s := plan.Situation{State: rel.state, Held: obs.held != nil, Waits: obs.waitsFor != "", RollsBack: p.RollsBack(), Failed: o.failed(),
		Taken: o.taken, TestRollsBack: p.Tests().RollsBack(), Made: o.madeStep() != nil, Deployed: rel.deployed}
	if v, due := requestDue(sub, AnnotationRollbackTo, obs.facts.RollbackTo); due {
		s.RollbackTo = v
	}
	// A new reconcile-at or reset-at value tries the held-back pair once more, and so does
	// a retry that is due.
	held := obs.heldBack
	s.HeldBack = held != nil && !o.nudged && !retryDue(held, p.Retries(), clk)
	f := o.recordedFailure()
	if f == nil && s.HeldBack {
		f = held
	}
	s.Retries = retriesLeft(f, p.Retries())
	if h := rel.head; h != nil {
		s.Revision, s.OlderDeployed, s.Kept, s.Unkept = h.Revision, len(h.OlderDeployed) > 0, h.Kept(), h.Unkept()
		s.TestDue = p.Tests().Enabled() && rel.state == records.StateInSync && h.MadeByRudder() &&
			(h.Tested() == "" || testsExpired(h, p.Tests().Interval(), clk) && h.Status == release.StatusDeployed)
		if obs.pin.back > 0 && h.ChartDigest == obs.want.ChartDigest && h.Status == release.StatusDeployed && !o.taken[plan.RolloutRollback] {
			s.RolloutBack = obs.pin.back
		}
	}
	s.Relabel = rel.rel != nil && needsAdoption(sub, obs.want, rel.rel)
	s.Adoptable = rel.proof != nil && rel.proof.Why == ""
	if rel.state == records.StateLocked {
		s.Foreign = foreign(rel.rel, clk)
	}
	return s
}

// testsIn is how long until the tests of revision h, which ran, are run again, with the
// watch's test.interval (0: never; ≤ 0 from a run the record gives no time of: due).
func testsIn(h *records.Head, interval time.Duration, clk clock.PassiveClock) (time.Duration, bool) {
	if interval <= 0 || h.Tested() == "" {
		return 0, false
	}
	return h.TestedAt.Add(interval).Sub(clk.Now()), true
}

// testsExpired reports whether the tests of revision h, which ran, are run again now.
func testsExpired(h *records.Head, interval time.Duration, clk clock.PassiveClock) bool {
	in, periodic := testsIn(h, interval, clk)
	return periodic && in <= 0
}

// retryIn is how long until the retry of f is due (≤ 0: due).
func retryIn(f *failure, clk clock.PassiveClock) time.Duration {
	if f.failed.LastFailure == nil {
		return 0
	}
	return f.failed.LastFailure.Add(retryBackoff(failures(f))).Sub(clk.Now())
}

// retryDue reports whether the held-back failure f of an earlier pass is retried now, with
// the watch's remediation.retries.
func retryDue(f *failure, retries int, clk clock.PassiveClock) bool {
	return retriesLeft(f, retries) && retryIn(f, clk) <= 0
}

// foreign reports whether the pending newest revision rel belongs to an operation rudder did
// not start that may still be running.
func foreign(rel *release.Release, clk clock.PassiveClock) bool {
	if h := records.HeadOf(rel); rel == nil || h.MadeByRudder() || h.RudderRollback() {
		// rudder's own: an install or upgrade carries LabelRevision, a rollback
		// LabelRollbackRevision, each with its own number.
		return false
	}
	return clk.Since(rel.LastDeployed) < ForeignPendingGrace
}

// needsAdoption reports whether the CR's release rel carries other shard labels than the CR.
func needsAdoption(sub *subject, want records.Desired, rel *release.Release) bool {
	keys := sub.w.Carried
	return len(keys) > 0 && rel.Labels[records.LabelOwnerUID] == want.OwnerUID && !helm.CarriedMatch(keys, sub.carried(), rel.Labels)
}
