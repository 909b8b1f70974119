package machine

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	rstatus "github.com/rudder-operator/rudder/api/status"
	"github.com/rudder-operator/rudder/internal/helm"
	"github.com/rudder-operator/rudder/internal/plan"
	"github.com/rudder-operator/rudder/internal/release"
)

// test runs the chart's test hooks (`helm test`) on the newest revision, one rudder made from
// the spec whose tests have not run: right after the install or upgrade that made it, or, when
// the process died in between, on the next pass. The outcome is recorded per revision
// (status.release.tested), so the tests of a revision run once — and again every
// test.interval of the watch on a deployed, unchanged revision (again).
//
// A failed test is reported (condition Tested naming each failed test Pod and how it ended,
// an Event with the tail of its log too). With test.onFailure: rollback the first run's
// failure is a failure of the release: next rolls back to the deployed revision before it,
// like a failed upgrade, and the (chart, values) is held back. A periodic run only reports.
type test struct {
	revision int
	// again: the revision's tests ran before; this is a periodic run (test.interval).
	again bool
}

func (test) name() plan.Action { return plan.Test }

func (a test) run(ctx context.Context, e *env, obs observed) result {
	p := e.watch.Policies()
	rel, err := e.helm.Actions.Test(ctx, e.scope, e.release, p.Tests().Timeout())
	ran, failedHooks := helm.Tests(rel)
	if err != nil && len(failedHooks) == 0 {
		// The tests could not run (the API server refused or failed): tried again.
		msg := fmt.Sprintf("testing release %s: %v", e.release, err)
		if helm.IsForbidden(err) {
			res := forbidden(e.scope, "Test", msg)
			res.call = callFailed
			return res
		}
		return result{verdict: retry, reason: rstatus.ReasonTestFailed, err: errors.New(msg), call: callFailed}
	}
	tested, c := testRun(a.revision, ran, failedHooks)
	tested.At = testsEnded(rel)
	countTestRun(e.watch.String(), len(failedHooks) == 0, a.again)
	if len(failedHooks) == 0 {
		return result{verdict: succeeded, after: &obs, conditions: map[string]*condition{rstatus.TypeTested: c},
			notes: []note{{corev1.EventTypeNormal, rstatus.ReasonTestSucceeded, "Test", c.message}}, record: record{tested: tested}, call: callOK}
	}
	msg := c.message
	if err != nil {
		// Helm's error puts each failed hook on a line of its own: one line here.
		msg += " (" + strings.Join(strings.Fields(err.Error()), " ") + ")"
	}
	end := ""
	if a.again {
		end = fmt.Sprintf("; a periodic run (test.interval %s): reported only", p.Tests().Interval())
	}
	msg, withLogs := msg+failedPods(rel, false)+end, msg+failedPods(rel, true)+end
	if p.Tests().ShowsLogs() {
		msg = withLogs
	}
	// The release is as it was (Helm recorded how the hooks ran in its record).
	res := result{verdict: succeeded, after: &obs, conditions: map[string]*condition{rstatus.TypeTested: {metav1.ConditionFalse,
		rstatus.ReasonTestFailed, msg}},
		notes: []note{{corev1.EventTypeWarning, rstatus.ReasonTestFailed, "Test", withLogs}}, record: record{tested: tested}, call: callFailed}
	if p.Tests().RollsBack() && !a.again {
		res.verdict, res.reason, res.message = failed, rstatus.ReasonTestFailed, "testing release "+e.release+": "+msg
		res.record.failed = e.failedRecord(rstatus.ReasonTestFailed, errors.New(res.message)).failed
	}
	return res
}

// failedPods is what the run read of its failed test Pods (helm.Actions.Test): how each ended,
// and with logs the tail of its log, as "; Pod name: …" each.
func failedPods(rel *release.Release, logs bool) string {
	var b strings.Builder
	for _, h := range rel.Hooks {
		said := []string{}
		if h.LastRun.End != "" {
			said = append(said, h.LastRun.End)
		}
		if logs && h.LastRun.Log != "" {
			said = append(said, h.LastRun.Log)
		}
		if len(said) > 0 {
			fmt.Fprintf(&b, "; Pod %s: %s", h.Name, strings.Join(said, "; "))
		}
	}
	return b.String()
}

// testsEnded is when the run of rel's tests ended, to the second as its record's labels keep
// it (nil: none ran).
func testsEnded(rel *release.Release) *metav1.Time {
	end := helm.TestsEnded(rel)
	if end.IsZero() {
		return nil
	}
	return &metav1.Time{Time: time.Unix(end.Unix(), 0)}
}

// testRun is a run of revision's tests as status.release.tested and the Tested condition
// report it: the tests that ran, and those of them that failed.
func testRun(revision int, ran, failedHooks []string) (*rstatus.TestedRelease, *condition) {
	if len(failedHooks) == 0 {
		msg := fmt.Sprintf("revision %d: %d tests passed", revision, len(ran))
		if len(ran) > 0 {
			msg += ": " + strings.Join(ran, ", ")
		}
		return &rstatus.TestedRelease{Revision: revision, Result: rstatus.TestSucceeded},
			&condition{metav1.ConditionTrue, rstatus.ReasonTestSucceeded, msg}
	}
	msg := fmt.Sprintf("revision %d: %d of %d tests failed: %s", revision, len(failedHooks), len(ran), strings.Join(failedHooks, ", "))
	return &rstatus.TestedRelease{Revision: revision, Result: rstatus.TestFailed, Failed: failedHooks},
		&condition{metav1.ConditionFalse, rstatus.ReasonTestFailed, msg}
}
