package watches

import (
	"fmt"
	"time"
)

// What test.onFailure may say.
const (
	// TestOnFailureReport records a failed test (condition Tested, status.release.tested, an
	// Event) and leaves the release as it is.
	TestOnFailureReport = "report"
	// TestOnFailureRollback also rolls the release back to the deployed revision before the
	// tested one, like a failed upgrade, and holds the (chart, values) back.
	TestOnFailureRollback = "rollback"
)

func (ck checking) checkTest() error {
	w := ck.w
	t := w.Test
	if t == nil {
		return nil
	}
	switch t.OnFailure {
	case "", TestOnFailureReport, TestOnFailureRollback:
	default:
		return fmt.Errorf("test.onFailure: %q must be %s or %s", t.OnFailure, TestOnFailureReport, TestOnFailureRollback)
	}
	if t.Interval != nil {
		switch {
		case !t.Enable:
			return fmt.Errorf("test.interval: %s runs the tests again, but test.enable is not set", t.Interval.Duration)
		case t.Interval.Duration < MinTestInterval:
			return fmt.Errorf("test.interval: %s is under the least interval, %s", t.Interval.Duration, MinTestInterval)
		}
	}
	if t.Timeout == nil {
		return nil
	}
	if t.Timeout.Duration <= 0 {
		return fmt.Errorf("test.timeout: %s must be positive", t.Timeout.Duration)
	}
	if bound := w.Limits.helm().Timeout(); t.Timeout.Duration > bound {
		return fmt.Errorf("test.timeout: %s is over the action timeout (limits.actionTimeout, %s), which bounds every action",
			t.Timeout.Duration, bound)
	}
	return nil
}

// Tests is the watch's test policy.
func (p Policies) Tests() TestPolicy { return TestPolicy(p) }

// TestPolicy is when and how a watch runs its releases' tests (helm test), and what a failed
// run does.
type TestPolicy struct{ w *Watch }

// Enabled reports whether the watch runs its releases' tests.
func (p TestPolicy) Enabled() bool { return p.w.Test != nil && p.w.Test.Enable }

// RollsBack reports whether a failed test rolls the release back.
func (p TestPolicy) RollsBack() bool {
	return p.Enabled() && p.w.Test.OnFailure == TestOnFailureRollback
}

// MinTestInterval is the shortest test.interval: a run of the tests takes a worker for up to
// its timeout, and creates and deletes Pods.
const MinTestInterval = time.Second

// Interval is how long after a run of the tests of a deployed, unchanged revision they run
// again (0: never).
func (p TestPolicy) Interval() time.Duration {
	if !p.Enabled() || p.w.Test.Interval == nil {
		return 0
	}
	return p.w.Test.Interval.Duration
}

// ShowsLogs reports whether the Tested condition carries the tail of a failed test Pod's log
// (the Event always does).
func (p TestPolicy) ShowsLogs() bool { return p.Enabled() && p.w.Test.ShowLogs }

// Timeout bounds one run of the tests.
func (p TestPolicy) Timeout() time.Duration {
	if p.w.Test != nil && p.w.Test.Timeout != nil {
		return p.w.Test.Timeout.Duration
	}
	return p.w.Limits.helm().Timeout()
}
