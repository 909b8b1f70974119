package controllers_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	rstatus "github.com/rudder-operator/rudder/api/status"
	"github.com/rudder-operator/rudder/internal/crtest"
	"github.com/rudder-operator/rudder/internal/testcluster"
)

// Periodic tests (issue 70): PeriodicProbe runs the tested chart's tests every 2 s on an
// unchanged release (test.interval), with onFailure: rollback, which a periodic run does not
// act on. Its "checks" test Pod asks for a node label of the test's own: taking the label off
// the node leaves the next run's Pod unscheduled until the test's 5 s timeout.

var periodicProbeGVK = schema.GroupVersionKind{Group: "test.rudder.dev", Version: "v1", Kind: "PeriodicProbe"}

// labelNode sets (value nil: removes) a label of the simulated node.
func labelNode(t *testing.T, key string, value *string) {
	t.Helper()
	body, err := json.Marshal(map[string]any{"metadata": map[string]any{"labels": map[string]*string{key: value}}})
	if err != nil {
		t.Fatal(err)
	}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: testcluster.NodeName}}
	if err := k8s.Patch(context.Background(), node, client.RawPatch(types.MergePatchType, body)); err != nil {
		t.Fatal(err)
	}
}

// testedAt is status.release.tested.at of u ("" when absent).
func testedAt(u *unstructured.Unstructured) string {
	at, _, _ := unstructured.NestedString(u.Object, "status", "release", "tested", "at")
	return at
}

// periodicRuns is rudder_test_runs_total of PeriodicProbe's periodic runs with result.
func periodicRuns(t *testing.T, result string) float64 {
	t.Helper()
	return crtest.Metric(t, "rudder_test_runs_total", map[string]string{"gvk": "PeriodicProbe.test.rudder.dev/v1", "result": result,
		"run": "periodic"})
}

// TestPeriodicTests: the tests run again on the unchanged release; a run that starts failing
// flips Tested to False naming the failed Pod, with an Event and a metric, and neither makes a
// revision nor rolls back; a passing run flips it back.
func TestPeriodicTests(t *testing.T) {
	crtest.NeedsCluster(t)
	t.Parallel()
	ns := crtest.NewNamespace(t, k8s, "periodic-")
	key := "periodic.test.rudder.dev/" + ns
	labelNode(t, key, new("ok"))
	t.Cleanup(func() { labelNode(t, key, nil) })
	create(t, crtest.NewCR(periodicProbeGVK, ns, "p", map[string]any{"testNodeSelector": map[string]any{key: "ok"}}))
	u := crtest.WaitCondition(t, k8s, periodicProbeGVK, ns, "p", rstatus.TypeTested, metav1.ConditionTrue, rstatus.ReasonTestSucceeded, timeout)
	first := testedAt(u)
	if first == "" {
		t.Fatalf("status.release.tested has no time: %v", u.Object["status"])
	}

	// Run again, unchanged, and passing.
	crtest.Eventually(t, "a periodic run after the first", timeout, func(ctx context.Context) (bool, error) {
		u, err := crtest.Get(ctx, k8s, periodicProbeGVK, ns, "p")
		if err != nil {
			return false, err
		}
		c := crtest.Condition(u, rstatus.TypeTested)
		return testedAt(u) > first && c != nil && c.Status == metav1.ConditionTrue, nil
	})
	if got := periodicRuns(t, "passed"); got < 1 {
		t.Fatalf("rudder_test_runs_total of passed periodic runs = %v, want ≥ 1", got)
	}

	// The node loses the label: the next run's Pod waits unscheduled, and the run fails.
	failedBefore := periodicRuns(t, "failed")
	labelNode(t, key, nil)
	u = crtest.WaitCondition(t, k8s, periodicProbeGVK, ns, "p", rstatus.TypeTested, metav1.ConditionFalse, rstatus.ReasonTestFailed, timeout)
	msg := crtest.Condition(u, rstatus.TypeTested).Message
	for _, want := range []string{"revision 1: 1 of 2 tests failed: p-checks", "Pod p-checks: phase Pending", "didn't match Pod's node affinity/selector", "a periodic run", "reported only"} {
		if !strings.Contains(msg, want) {
			t.Fatalf("Tested says %q, want it to say %q", msg, want)
		}
	}
	checkTested(t, u, 1, rstatus.TestFailed, "p-checks")
	crtest.WaitEvent(t, k8s, ns, "p", rstatus.ReasonTestFailed, "p-checks", "a periodic run")
	if got := periodicRuns(t, "failed"); got <= failedBefore {
		t.Fatalf("rudder_test_runs_total of failed periodic runs = %v, want more than %v", got, failedBefore)
	}
	// No revision and no rollback (onFailure: rollback acts on the run after an upgrade only),
	// and Ready is about the objects.
	if got := releaseRevisions(t, ns, "p"); !slices.Equal(got, []string{"1:deployed"}) {
		t.Fatalf("history %v after a failed periodic run, want revision 1 alone", got)
	}
	if c := crtest.Condition(u, rstatus.TypeReady); c == nil || c.Status != metav1.ConditionTrue {
		t.Fatalf("Ready after a failed periodic run: %+v", c)
	}

	// The label is back: the next run passes, and Tested flips back.
	labelNode(t, key, new("ok"))
	u = crtest.WaitCondition(t, k8s, periodicProbeGVK, ns, "p", rstatus.TypeTested, metav1.ConditionTrue, rstatus.ReasonTestSucceeded, timeout)
	checkTested(t, u, 1, rstatus.TestSucceeded)
	if got := releaseRevisions(t, ns, "p"); !slices.Equal(got, []string{"1:deployed"}) {
		t.Fatalf("history %v, want revision 1 alone", got)
	}
	if c := crtest.Condition(u, rstatus.TypeStalled); c != nil && c.Status == metav1.ConditionTrue {
		t.Fatalf("Stalled after periodic runs: %s", fmt.Sprint(c))
	}
}
