package controllers_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	rstatus "github.com/rudder-operator/rudder/api/status"
	"github.com/rudder-operator/rudder/internal/crtest"
)

var (
	testProbeGVK    = schema.GroupVersionKind{Group: "test.rudder.dev", Version: "v1", Kind: "TestProbe"}
	testRollbackGVK = schema.GroupVersionKind{Group: "test.rudder.dev", Version: "v1", Kind: "TestRollback"}
)

// TestReleaseTests: with test.enable, the chart's test hooks run after each install and
// upgrade (kwok ends each test Pod with the exit code the chart's value gives): Tested,
// status.release.tested and an Event say how they went, Ready stays about the objects, and a
// failed test is only reported.
func TestReleaseTests(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ns := crtest.NewNamespace(t, k8s, "tests-")
	if err := k8s.Create(ctx, crtest.NewCR(testProbeGVK, ns, "probe", map[string]any{"message": "one"})); err != nil {
		t.Fatal(err)
	}
	crtest.WaitCondition(t, k8s, testProbeGVK, ns, "probe", rstatus.TypeTested, metav1.ConditionTrue, rstatus.ReasonTestSucceeded, timeout)
	u := crtest.WaitCondition(t, k8s, testProbeGVK, ns, "probe", rstatus.TypeReady, metav1.ConditionTrue, "", timeout)
	checkTested(t, u, 1, rstatus.TestSucceeded)
	crtest.WaitEvent(t, k8s, ns, "probe", rstatus.ReasonTestSucceeded, "revision 1", "2 tests passed")
	// The passing test's Pod is deleted by its hook-delete-policy (hook-succeeded); the other
	// is kept until the next run (Helm's default, before-hook-creation).
	crtest.Eventually(t, "the hook-succeeded test Pod deleted", timeout, func(ctx context.Context) (bool, error) {
		err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "probe-passes"}, &corev1.Pod{})
		return apierrors.IsNotFound(err), client.IgnoreNotFound(err)
	})
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "probe-checks"}, &corev1.Pod{}); err != nil {
		t.Fatalf("the kept test Pod: %v", err)
	}

	patch(t, testProbeGVK, ns, "probe", `{"spec":{"message":"two","testExitCode":"3"}}`)
	u = crtest.WaitCondition(t, k8s, testProbeGVK, ns, "probe", rstatus.TypeTested, metav1.ConditionFalse, rstatus.ReasonTestFailed, timeout)
	checkTested(t, u, 2, rstatus.TestFailed, "probe-checks")
	crtest.WaitEvent(t, k8s, ns, "probe", rstatus.ReasonTestFailed, "revision 2", "probe-checks")
	// Only reported: the upgrade stands, and Ready is about the objects.
	u = crtest.WaitCondition(t, k8s, testProbeGVK, ns, "probe", rstatus.TypeReady, metav1.ConditionTrue, "", timeout)
	if c := crtest.Condition(u, rstatus.TypeReleased); c.Status != metav1.ConditionTrue || !strings.Contains(c.Message, "revision 2") {
		t.Fatalf("Released %s/%s: %s", c.Status, c.Reason, c.Message)
	}
	if got := releaseRevisions(t, ns, "probe"); !slices.Equal(got, []string{"1:superseded", "2:deployed"}) {
		t.Fatalf("history %v, want the upgrade only", got)
	}
}

// TestReleaseTestsRollBack: with test.onFailure: rollback, a failed test rolls the release
// back to the revision before, like a failed upgrade, and the pair is held back.
func TestReleaseTestsRollBack(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ns := crtest.NewNamespace(t, k8s, "testsrb-")
	if err := k8s.Create(ctx, crtest.NewCR(testRollbackGVK, ns, "rb", map[string]any{"message": "one"})); err != nil {
		t.Fatal(err)
	}
	crtest.WaitCondition(t, k8s, testRollbackGVK, ns, "rb", rstatus.TypeTested, metav1.ConditionTrue, rstatus.ReasonTestSucceeded, timeout)
	patch(t, testRollbackGVK, ns, "rb", `{"spec":{"message":"two","testExitCode":"1"}}`)
	u := crtest.WaitCondition(t, k8s, testRollbackGVK, ns, "rb", rstatus.TypeStalled, metav1.ConditionTrue, rstatus.ReasonTestFailed, timeout)
	checkTested(t, u, 2, rstatus.TestFailed, "rb-checks")
	if c := crtest.Condition(u, rstatus.TypeReleased); c.Reason != rstatus.ReasonRolledBack {
		t.Fatalf("Released %s/%s: %s", c.Status, c.Reason, c.Message)
	}
	crtest.WaitEvent(t, k8s, ns, "rb", rstatus.ReasonRolledBack, "rolled back to revision 1")
	if got := releaseRevisions(t, ns, "rb"); !slices.Equal(got, []string{"1:superseded", "2:superseded", "3:deployed"}) {
		t.Fatalf("history %v, want the upgrade and its rollback", got)
	}
	if failed, _, _ := unstructured.NestedMap(u.Object, "status", "release", "failed"); failed == nil {
		t.Fatal("the failed pair is not held back in status.release.failed")
	}
	var cm corev1.ConfigMap
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "rb"}, &cm); err != nil || cm.Data["message"] != "one" {
		t.Fatalf("the rollback did not restore revision 1's ConfigMap: %v %v", cm.Data, err)
	}
}

// checkTested checks status.release.tested.
func checkTested(t *testing.T, u *unstructured.Unstructured, revision int64, result string, failed ...string) {
	t.Helper()
	tested, _, _ := unstructured.NestedMap(u.Object, "status", "release", "tested")
	got, _, _ := unstructured.NestedStringSlice(tested, "failed")
	if tested["revision"] != revision || tested["result"] != result || !slices.Equal(got, failed) {
		t.Fatalf("status.release.tested = %v, want revision %d, %s, failed %v", tested, revision, result, failed)
	}
}

// releaseRevisions lists a release's stored revisions as "version:status", oldest first.
func releaseRevisions(t *testing.T, ns, name string) []string {
	t.Helper()
	var list corev1.SecretList
	if err := k8s.List(context.Background(), &list, client.InNamespace(ns), client.MatchingLabels{"owner": "helm", "name": name}); err != nil {
		t.Fatal(err)
	}
	out := make([]string, len(list.Items))
	for i, s := range list.Items {
		out[i] = s.Labels["version"] + ":" + s.Labels["status"]
	}
	slices.Sort(out)
	return out
}

// TestDeletingCancelsAWedgedTest: deleting a CR whose tests wait on a test Pod that runs for
// ten minutes cancels the run (Releases.Test ends with its pass's context): the CR is gone,
// its release uninstalled, well inside the watch's test timeout (five minutes, actionTimeout's
// default), which is when the run would end by itself.
func TestDeletingCancelsAWedgedTest(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ns := crtest.NewNamespace(t, k8s, "tests-")
	spec := map[string]any{"message": "wedged", "testDelayMs": "600000"}
	if err := k8s.Create(ctx, crtest.NewCR(testProbeGVK, ns, "wedged", spec)); err != nil {
		t.Fatal(err)
	}
	crtest.Eventually(t, "the test Pod running", timeout, func(ctx context.Context) (bool, error) {
		err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "wedged-checks"}, &corev1.Pod{})
		return err == nil, client.IgnoreNotFound(err)
	})
	if err := k8s.Delete(ctx, crtest.NewCR(testProbeGVK, ns, "wedged", nil)); err != nil {
		t.Fatal(err)
	}
	crtest.Eventually(t, "the CR deleted while its test runs", 60*time.Second, func(ctx context.Context) (bool, error) {
		_, err := crtest.Get(ctx, k8s, testProbeGVK, ns, "wedged")
		return apierrors.IsNotFound(err), client.IgnoreNotFound(err)
	})
	if got := releaseRevisions(t, ns, "wedged"); len(got) != 0 {
		t.Fatalf("release history after the deletion: %v, want none", got)
	}
}
