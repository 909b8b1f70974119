package helm

import (
	"context"
	"testing"
	"time"

	release "helm.sh/helm/v4/pkg/release/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
)

// What a run reads of its failed test Pods: only the failed test hooks that are Pods, in the
// namespace each names, bounded, with how the Pod ended.
func TestFailedTestLogs(t *testing.T) {
	t.Parallel()
	cs := fake.NewClientset(&corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "other", Name: "web-checks"},
		Status: corev1.PodStatus{Phase: corev1.PodFailed, ContainerStatuses: []corev1.ContainerStatus{{Name: "test",
			State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 3, Reason: "Error"}}}}},
	})
	var asked []*corev1.PodLogOptions
	cs.PrependReactor("get", "pods", func(a clienttesting.Action) (bool, runtime.Object, error) {
		if ga, ok := a.(clienttesting.GenericAction); ok && a.GetSubresource() == "log" {
			if o, ok := ga.GetValue().(*corev1.PodLogOptions); ok {
				asked = append(asked, o)
			}
		}
		return false, nil, nil
	})
	hook := func(name, kind string, phase release.HookPhase, events ...release.HookEvent) *release.Hook {
		return &release.Hook{Name: name, Kind: kind, Events: events, LastRun: release.HookExecution{Phase: phase, CompletedAt: time.Now()},
			Manifest: "apiVersion: v1\nkind: " + kind + "\nmetadata:\n  name: " + name + "\n  namespace: other\n"}
	}
	rel := &release.Release{Hooks: []*release.Hook{
		hook("web-checks", "Pod", release.HookPhaseFailed, release.HookTest),
		hook("web-passes", "Pod", release.HookPhaseSucceeded, release.HookTest),
		hook("web-job", "Job", release.HookPhaseFailed, release.HookTest),
		hook("web-pre", "Pod", release.HookPhaseFailed, release.HookPreInstall),
	}}
	read := failedTestPods(context.Background(), cs, "demo", rel)
	if len(read) != 1 {
		t.Fatalf("read %d hooks, want web-checks only: %v", len(read), read)
	}
	// client-go's fake serves every log as "fake logs".
	if got, want := read["web-checks"], (podRead{end: "phase Failed, container test exited 3 Error", log: "log: fake logs"}); got != want {
		t.Fatalf("web-checks: %+v, want %+v", got, want)
	}
	if len(asked) != 1 || *asked[0].TailLines != testLogLines || *asked[0].LimitBytes != testLogBytes {
		t.Fatalf("the log was asked for unbounded: %+v", asked)
	}
}
