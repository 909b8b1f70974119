package faults_test

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	rstatus "github.com/rudder-operator/rudder/api/status"
	"github.com/rudder-operator/rudder/internal/crtest"
	"github.com/rudder-operator/rudder/internal/machine"
)

var testProbeGVK = schema.GroupVersionKind{Group: "test.rudder.dev", Version: "v1", Kind: "TestProbe"}

// timeout bounds each wait of the tests' tests; the slow test Pod alone takes 8 s.
const timeout = 90 * time.Second

// TestSIGKILLBetweenUpgradeAndTests: rudder is killed while the tests of a revision it just
// upgraded to run; the next process runs them, once, and records them for that revision.
func TestSIGKILLBetweenUpgradeAndTests(t *testing.T) {
	ctx := context.Background()
	ns := crtest.NewNamespace(t, k8s, "faults-tests-")
	r := start(t, "rudder-0")
	if err := k8s.Create(ctx, crtest.NewCR(testProbeGVK, ns, "slow", map[string]any{"message": "one"})); err != nil {
		t.Fatal(err)
	}
	crtest.WaitCondition(t, k8s, testProbeGVK, ns, "slow", rstatus.TypeTested, metav1.ConditionTrue, rstatus.ReasonTestSucceeded, timeout)

	// Revision 2's "checks" test Pod runs for 8 s: rudder is killed while it waits for it.
	patch(t, ns, "slow", `{"spec":{"message":"two","testDelayMs":"8000"}}`)
	crtest.Eventually(t, "revision 2's tests running", timeout, func(ctx context.Context) (bool, error) {
		var pod corev1.Pod
		err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "slow-checks"}, &pod)
		return err == nil && pod.Annotations["stage.rudder.dev/complete-after-ms"] == "8000", client.IgnoreNotFound(err)
	})
	r.kill()
	if u, err := crtest.Get(ctx, k8s, testProbeGVK, ns, "slow"); err != nil || testedRevision(u) != 1 {
		t.Fatalf("the killed process recorded revision 2's tests (%v)", err)
	}

	start(t, "rudder-1")
	u := crtest.WaitCondition(t, k8s, testProbeGVK, ns, "slow", rstatus.TypeTested, metav1.ConditionTrue, rstatus.ReasonTestSucceeded, timeout)
	for testedRevision(u) != 2 {
		u = crtest.WaitCondition(t, k8s, testProbeGVK, ns, "slow", rstatus.TypeTested, metav1.ConditionTrue, rstatus.ReasonTestSucceeded, timeout)
	}
	var pod corev1.Pod
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "slow-checks"}, &pod); err != nil {
		t.Fatal(err)
	}
	// A later pass (its refusal of a rollback-to value says it ran) runs no test again: the
	// test Pod Helm would recreate is the same.
	patch(t, ns, "slow", `{"metadata":{"annotations":{"`+machine.AnnotationRollbackTo+`":"99"}}}`)
	crtest.WaitCondition(t, k8s, testProbeGVK, ns, "slow", rstatus.TypeRollbackRequest, metav1.ConditionFalse, rstatus.ReasonRollbackRejected, timeout)
	var again corev1.Pod
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "slow-checks"}, &again); err != nil || again.UID != pod.UID {
		t.Fatalf("revision 2's tests ran again (%v)", err)
	}
	runs := crtest.CountEvents(t, k8s, ns, "slow", rstatus.ReasonTestSucceeded, "revision 2")
	if runs != 1 {
		t.Fatalf("revision 2's tests reported %d times, want once", runs)
	}
}

func testedRevision(u *unstructured.Unstructured) int64 {
	n, _, _ := unstructured.NestedInt64(u.Object, "status", "release", "tested", "revision")
	return n
}

func patch(t *testing.T, ns, name, data string) {
	t.Helper()
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(testProbeGVK)
	u.SetNamespace(ns)
	u.SetName(name)
	if err := k8s.Patch(context.Background(), u, client.RawPatch(types.MergePatchType, []byte(data))); err != nil {
		t.Fatal(err)
	}
}
