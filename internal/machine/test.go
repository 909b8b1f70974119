package machine

import (
	"context"
	"errors"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	rstatus "github.com/rudder-operator/rudder/api/status"
	"github.com/rudder-operator/rudder/internal/helm"
	"github.com/rudder-operator/rudder/internal/plan"
)

// test runs the chart's test hooks (`helm test`) on the newest revision, one rudder made from
// the spec whose tests have not run: right after the install or upgrade that made it, or, when
// the process died in between, on the next pass. The outcome is recorded per revision
// (status.release.tested), so the tests of a revision run once.
//
// A failed test is reported (condition Tested, an Event), and with test.onFailure: rollback it
// is a failure of the release: next rolls back to the deployed revision before it, like a
// failed upgrade, and the (chart, values) is held back.
type test struct{ revision int }

func (test) name() plan.Action { return plan.Test }

func (a test) run(ctx context.Context, e *env, obs observed) result {
	rel, err := e.helm.Test(ctx, e.scope, e.release, e.watch.Policies().TestTimeout())
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
	if len(failedHooks) == 0 {
		return result{verdict: succeeded, after: &obs, conditions: map[string]*condition{rstatus.TypeTested: c},
			notes: []note{{corev1.EventTypeNormal, rstatus.ReasonTestSucceeded, "Test", c.message}}, record: record{tested: tested}, call: callOK}
	}
	msg := c.message
	if err != nil {
		// Helm's error puts each failed hook on a line of its own: one line here.
		msg += " (" + strings.Join(strings.Fields(err.Error()), " ") + ")"
	}
	// The release is as it was (Helm recorded how the hooks ran in its record).
	res := result{verdict: succeeded, after: &obs, conditions: map[string]*condition{rstatus.TypeTested: {metav1.ConditionFalse,
		rstatus.ReasonTestFailed, msg}},
		notes: []note{{corev1.EventTypeWarning, rstatus.ReasonTestFailed, "Test", msg}}, record: record{tested: tested}, call: callFailed}
	if e.watch.Policies().TestRollsBack() {
		res.verdict, res.reason, res.message = failed, rstatus.ReasonTestFailed, "testing release "+e.release+": "+msg
		res.record.failed = e.failedRecord(rstatus.ReasonTestFailed, errors.New(res.message)).failed
	}
	return res
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
