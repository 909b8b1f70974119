package at

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	cnatv1alpha1 "github.com/rudder-operator/rudder/api/cnat/v1alpha1"
	"github.com/rudder-operator/rudder/internal/hook"
)

func atObj(schedule, phase string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{
		"spec": map[string]any{"schedule": schedule, "command": "echo hi"},
	}}
	if phase != "" {
		u.Object["status"] = map[string]any{"phase": phase}
	}
	u.SetGroupVersionKind(GVK)
	u.SetNamespace("ns")
	u.SetName("job")
	return u
}

func phaseOf(u *unstructured.Unstructured) string {
	p, _, _ := unstructured.NestedString(u.Object, "status", "phase")
	return p
}

func TestPhaseMachineWaitsExactlyUntilTheSchedule(t *testing.T) {
	start := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	clk := clocktesting.NewFakePassiveClock(start)
	h := &Hooks{Clock: clk}
	obj := atObj("2026-11-29T10:00:10Z", "")

	d, err := h.PreRelease(context.Background(), obj, nil)
	if err != nil || !d.Hold || d.RequeueAfter != 10*time.Second || phaseOf(obj) != cnatv1alpha1.PhasePending {
		t.Fatalf("at 10:00:00: %+v %v phase %s", d, err, phaseOf(obj))
	}
	clk.SetTime(start.Add(7 * time.Second))
	d, _ = h.PreRelease(context.Background(), obj, nil)
	if !d.Hold || d.RequeueAfter != 3*time.Second {
		t.Fatalf("at 10:00:07: %+v", d)
	}
	clk.SetTime(start.Add(10 * time.Second))
	d, _ = h.PreRelease(context.Background(), obj, nil)
	if d != hook.Proceed || phaseOf(obj) != cnatv1alpha1.PhaseRunning {
		t.Fatalf("at 10:00:10: %+v phase %s", d, phaseOf(obj))
	}
}

func TestPastScheduleRunsAtOnce(t *testing.T) {
	h := &Hooks{Clock: clocktesting.NewFakePassiveClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))}
	obj := atObj("2020-11-16T10:12:00Z", "")
	if d, err := h.PreRelease(context.Background(), obj, nil); err != nil || d.Hold || phaseOf(obj) != cnatv1alpha1.PhaseRunning {
		t.Fatalf("%+v %v %s", d, err, phaseOf(obj))
	}
}

func TestDoneNeverRunsAgain(t *testing.T) {
	h := &Hooks{Clock: clocktesting.NewFakePassiveClock(time.Now())}
	obj := atObj("2020-11-16T10:12:00Z", cnatv1alpha1.PhaseDone)
	obj.Object["status"].(map[string]any)["succeeded"] = true
	if d, _ := h.PreRelease(context.Background(), obj, nil); !d.Hold || d.RequeueAfter != 0 {
		t.Fatalf("DONE must hold for good: %+v", d)
	}
}

func TestOutcomeIsRecorded(t *testing.T) {
	finished := metav1.NewTime(time.Date(2026, 11, 29, 10, 0, 5, 0, time.UTC))
	for _, tc := range []struct {
		name      string
		phase     corev1.PodPhase
		code      int32
		reason    string
		succeeded bool
	}{
		{"success", corev1.PodSucceeded, 0, "Completed", true},
		{"failure", corev1.PodFailed, 3, "Error", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pod := &corev1.Pod{
				ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "job"},
				Status: corev1.PodStatus{Phase: tc.phase, ContainerStatuses: []corev1.ContainerStatus{{
					Name: "command", State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
						ExitCode: tc.code, Reason: tc.reason, FinishedAt: finished}},
				}}},
			}
			s := runtime.NewScheme()
			_ = corev1.AddToScheme(s)
			c := fake.NewClientBuilder().WithScheme(s).WithObjects(pod).Build()
			h := &Hooks{Clock: clocktesting.NewFakePassiveClock(time.Now())}
			obj := atObj("2020-11-16T10:12:00Z", cnatv1alpha1.PhaseRunning)
			if _, err := h.PostRelease(context.Background(), obj, &hook.Release{Name: "job", Namespace: "ns"}, c); err != nil {
				t.Fatal(err)
			}
			var at cnatv1alpha1.At
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, &at); err != nil {
				t.Fatal(err)
			}
			st := at.Status
			if st.Phase != cnatv1alpha1.PhaseDone || *st.Succeeded != tc.succeeded || *st.ExitCode != tc.code ||
				st.Reason != tc.reason || !st.FinishTime.Equal(&finished) {
				t.Fatalf("status %+v", st)
			}
		})
	}
}
