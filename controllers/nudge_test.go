package controllers_test

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	rstatus "github.com/rudder-operator/rudder/api/status"
	"github.com/rudder-operator/rudder/internal/crtest"
	"github.com/rudder-operator/rudder/internal/machine"
)

var nudgeProbeGVK = schema.GroupVersionKind{Group: "test.rudder.dev", Version: "v1", Kind: "NudgeProbe"}

// TestNudges: an install held back by something outside the spec and the chart (an object of
// the same name that the release did not make) is tried again by rudder.dev/reconcile-at once
// the cause is gone, and rudder.dev/reset-at clears the failure; a value handled does nothing
// more, and a new one on a pair that still fails tries it once.
func TestNudges(t *testing.T) {
	ctx := context.Background()
	ns := crtest.NewNamespace(t, k8s, "nudge-")
	failedInstalls := func() float64 {
		return crtest.Metric(t, "rudder_release_actions_total", map[string]string{"gvk": "NudgeProbe.test.rudder.dev/v1", "action": "install", "result": "failed"})
	}
	blocker := func(name string) *corev1.ConfigMap {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
		create(t, cm)
		return cm
	}
	for _, tc := range []struct{ name, annotation string }{{"r", machine.AnnotationReconcileAt}, {"z", machine.AnnotationResetAt}} {
		cm := blocker(tc.name)
		create(t, crtest.NewCR(nudgeProbeGVK, ns, tc.name, map[string]any{}))
		crtest.WaitCondition(t, k8s, nudgeProbeGVK, ns, tc.name, rstatus.TypeStalled, metav1.ConditionTrue, "", timeout)
		if err := k8s.Delete(ctx, cm); err != nil {
			t.Fatal(err)
		}
		patch(t, nudgeProbeGVK, ns, tc.name, `{"metadata":{"annotations":{"`+tc.annotation+`":"1"}}}`)
		u := crtest.WaitCondition(t, k8s, nudgeProbeGVK, ns, tc.name, rstatus.TypeReady, metav1.ConditionTrue, "", timeout)
		rel, _, _ := unstructured.NestedMap(u.Object, "status", "release")
		if rel["failed"] != nil {
			t.Fatalf("%s: status.release.failed kept after %s: %v", tc.name, tc.annotation, rel["failed"])
		}
		field := map[string]string{machine.AnnotationReconcileAt: "reconcileRequest", machine.AnnotationResetAt: "resetRequest"}[tc.annotation]
		if rel[field] != "1" {
			t.Fatalf("%s: status.release.%s = %v", tc.name, field, rel[field])
		}
	}

	// A pair that still fails: each new value tries it once, a value handled never again.
	blocker("s")
	create(t, crtest.NewCR(nudgeProbeGVK, ns, "s", map[string]any{}))
	crtest.WaitCondition(t, k8s, nudgeProbeGVK, ns, "s", rstatus.TypeStalled, metav1.ConditionTrue, "", timeout)
	before := failedInstalls()
	patch(t, nudgeProbeGVK, ns, "s", `{"metadata":{"annotations":{"`+machine.AnnotationReconcileAt+`":"2"}}}`)
	crtest.Eventually(t, "reconcile-at=2 handled", timeout, func(ctx context.Context) (bool, error) {
		u, err := crtest.Get(ctx, k8s, nudgeProbeGVK, ns, "s")
		v, _, _ := unstructured.NestedString(u.Object, "status", "release", "reconcileRequest")
		return err == nil && v == "2", err
	})
	if got := failedInstalls() - before; got != 1 {
		t.Fatalf("reconcile-at=2 tried the pair %v times, want once", got)
	}
	// A later pass of s, with the same reconcile-at value (its refusal of a rollback-to value
	// says it ran).
	patch(t, nudgeProbeGVK, ns, "s", `{"metadata":{"annotations":{"`+machine.AnnotationRollbackTo+`":"99"}}}`)
	crtest.WaitCondition(t, k8s, nudgeProbeGVK, ns, "s", rstatus.TypeRollbackRequest, metav1.ConditionFalse, rstatus.ReasonRollbackRejected, timeout)
	if got := failedInstalls() - before; got != 1 {
		t.Fatalf("a handled reconcile-at value tried the pair again (%v tries)", got)
	}
}
