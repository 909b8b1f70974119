package at

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cnatv1alpha1 "github.com/rudder-operator/rudder/api/cnat/v1alpha1"
	"github.com/rudder-operator/rudder/internal/hook"
)

// GVK of the At kind.
var GVK = cnatv1alpha1.GroupVersion.WithKind("At")

// Hooks implement the phase machine. Clock is injectable for tests.
type Hooks struct {
	Clock clock.PassiveClock
}

// Register adds the At hooks to a registry.
func Register(r *hook.Registry, c clock.PassiveClock) {
	if c == nil {
		c = clock.RealClock{}
	}
	h := &Hooks{Clock: c}
	r.AddPreRelease(GVK, hook.PreReleaseFunc(h.PreRelease))
	r.AddPostRelease(GVK, hook.PostReleaseFunc(h.PostRelease))
}

// PreRelease holds the release until the schedule, lets it go at the schedule (RUNNING), and
// holds it for good once DONE: an At never runs twice.
func (h *Hooks) PreRelease(_ context.Context, obj *unstructured.Unstructured, _ map[string]any) (hook.Decision, error) {
	var at cnatv1alpha1.At
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, &at); err != nil {
		return hook.Decision{}, err
	}
	switch at.Status.Phase {
	case cnatv1alpha1.PhaseDone:
		return hook.Decision{Hold: true, Reason: "Done", Message: doneMessage(&at.Status)}, nil
	case cnatv1alpha1.PhaseRunning:
		return hook.Proceed, nil
	}
	when, err := time.Parse(time.RFC3339, at.Spec.Schedule)
	if err != nil {
		return hook.Decision{}, fmt.Errorf("spec.schedule: %w", err)
	}
	now := h.Clock.Now()
	if now.Before(when) {
		setStatus(obj, map[string]any{"phase": cnatv1alpha1.PhasePending})
		// Exactly the remaining time: no polling.
		return hook.Decision{Hold: true, RequeueAfter: when.Sub(now), Reason: "Scheduled",
			Message: "runs at " + when.UTC().Format(time.RFC3339)}, nil
	}
	setStatus(obj, map[string]any{"phase": cnatv1alpha1.PhaseRunning, "startTime": metav1.NewTime(now).ToUnstructured()})
	return hook.Proceed, nil
}

// PostRelease watches the Pod while RUNNING and records its outcome as DONE.
func (h *Hooks) PostRelease(ctx context.Context, obj *unstructured.Unstructured, rel *hook.Release, c client.Reader) (time.Duration,
	error) {
	phase, _, _ := unstructured.NestedString(obj.Object, "status", "phase")
	if phase != cnatv1alpha1.PhaseRunning || rel == nil {
		return 0, nil
	}
	var pod corev1.Pod
	if err := c.Get(ctx, client.ObjectKey{Namespace: rel.Namespace, Name: rel.Name}, &pod); err != nil {
		if apierrors.IsNotFound(err) {
			return 0, nil // not in the cache yet, or recreated by drift correction: its events wake us
		}
		return 0, fmt.Errorf("reading pod %s: %w", rel.Name, err)
	}
	if pod.Status.Phase != corev1.PodSucceeded && pod.Status.Phase != corev1.PodFailed {
		return 0, nil
	}
	succeeded := pod.Status.Phase == corev1.PodSucceeded
	fields := map[string]any{"phase": cnatv1alpha1.PhaseDone, "succeeded": succeeded}
	finished := metav1.NewTime(h.Clock.Now())
	for _, cs := range pod.Status.ContainerStatuses {
		if t := cs.State.Terminated; t != nil {
			fields["exitCode"] = int64(t.ExitCode)
			fields["reason"] = t.Reason
			if !t.FinishedAt.IsZero() {
				finished = t.FinishedAt
			}
			break
		}
	}
	if _, ok := fields["reason"]; !ok {
		fields["reason"] = pod.Status.Reason
	}
	fields["finishTime"] = finished.ToUnstructured()
	setStatus(obj, fields)
	return 0, nil
}

func doneMessage(s *cnatv1alpha1.AtStatus) string {
	switch {
	case s.Succeeded != nil && *s.Succeeded:
		return "done: the command succeeded"
	case s.ExitCode != nil:
		return fmt.Sprintf("done: the command failed with exit code %d (%s)", *s.ExitCode, s.Reason)
	default:
		return "done: the command failed (" + s.Reason + ")"
	}
}

func setStatus(obj *unstructured.Unstructured, fields map[string]any) {
	st, _, _ := unstructured.NestedMap(obj.Object, "status")
	if st == nil {
		st = map[string]any{}
	}
	for k, v := range fields {
		st[k] = v
	}
	obj.Object["status"] = st
}
