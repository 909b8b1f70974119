package helm

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"helm.sh/helm/v4/pkg/action"
	release "helm.sh/helm/v4/pkg/release/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"

	"github.com/rudder-operator/rudder/internal/records"
	view "github.com/rudder-operator/rudder/internal/release"
)

// Test runs the test hooks of a release's newest revision (`helm test`), as the scope's
// identity and within its confinement like every action: Helm creates each hook, waits for it
// within timeout, records how it ran in the revision's record, and deletes it as its
// helm.sh/hook-delete-policy says. The revision it returns says how each hook ran (see
// Tests), and carries how each failed test Pod ended and the tail of its log (HookRun.End, Log), read before the
// hooks are deleted; the error is Helm's, and a test that failed is one.
func (a *Actions) Test(ctx context.Context, s Scope, name string, timeout time.Duration) (*view.Release, error) {
	c := a.core
	r, err := c.begin(ctx, s, storing{manifest: true, testing: true})
	if err != nil {
		return nil, err
	}
	rt := action.NewReleaseTesting(r.conf)
	rt.Namespace = s.Namespace
	rt.Timeout = timeout
	r.kube.serverSide = r.appliesServerSide(name, 0)
	var read map[string]podRead
	rel, err := RunTests(rt, name, func(rel *release.Release) {
		cs, err := r.conf.KubernetesClientSet()
		if err == nil {
			read = failedTestPods(ctx, cs, s.Namespace, rel)
		}
	})
	v := View(rel)
	if v != nil {
		for i := range v.Hooks {
			p := read[v.Hooks[i].Name]
			v.Hooks[i].LastRun.End, v.Hooks[i].LastRun.Log = p.end, p.log
		}
	}
	return v, r.result(err)
}

// RunTests runs Helm's test action on release name and returns the revision it ran, which says
// how each test hook ran. Helm 4 leaves the hooks' deletion (their delete policies) to the
// caller, for it to read their logs first: ran (nil: nothing) reads what it wants of the run,
// and the hooks are deleted after it.
func RunTests(rt *action.ReleaseTesting, name string, ran func(*release.Release)) (*release.Release, error) {
	rel, shutdown, err := rt.Run(name)
	if v1, verr := records.V1Of(rel, nil); ran != nil && verr == nil && v1 != nil {
		ran(v1)
	}
	if serr := shutdown(); err == nil {
		err = serr
	}
	return records.V1Of(rel, err)
}

// The bounds of what is read of a failed test Pod's log: the last lines, at most so many
// bytes, within so long. A test Pod's log is the chart's; rudder reads only its tail.
const (
	testLogLines   = 10
	testLogBytes   = 2048
	testLogTimeout = 10 * time.Second
)

// podRead is what a run read of a failed test Pod: how it ended, and the tail of its log
// ("log: <the last lines, joined by |>") or why there is none.
type podRead struct{ end, log string }

// failedTestPods reads each failed test hook of rel that is a Pod, by hook name.
func failedTestPods(ctx context.Context, cs kubernetes.Interface, namespace string, rel *release.Release) map[string]podRead {
	read := map[string]podRead{}
	for _, h := range rel.Hooks {
		if h.Kind != "Pod" || h.LastRun.Phase != release.HookPhaseFailed || !slices.Contains(h.Events, release.HookTest) {
			continue
		}
		ns := namespace
		var meta struct {
			Metadata metav1.ObjectMeta `json:"metadata"`
		}
		if yaml.Unmarshal([]byte(h.Manifest), &meta) == nil && meta.Metadata.Namespace != "" {
			ns = meta.Metadata.Namespace
		}
		read[h.Name] = readTestPod(ctx, cs, ns, h.Name)
	}
	return read
}

// readTestPod reads Pod ns/name: its end (which says most when it never ran) and its log's tail.
func readTestPod(ctx context.Context, cs kubernetes.Interface, ns, name string) podRead {
	ctx, cancel := context.WithTimeout(ctx, testLogTimeout)
	defer cancel()
	var p podRead
	if pod, err := cs.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{}); err == nil {
		p.end = podEnd(pod)
	}
	lines, bytes := int64(testLogLines), int64(testLogBytes)
	out, err := cs.CoreV1().Pods(ns).GetLogs(name, &corev1.PodLogOptions{TailLines: &lines, LimitBytes: &bytes}).DoRaw(ctx)
	switch log := strings.TrimSpace(string(out)); {
	case err != nil:
		p.log = "no log: " + oneLine(err.Error())
	case log == "":
		p.log = "an empty log"
	default:
		var kept []string
		for l := range strings.SplitSeq(log, "\n") {
			if l = strings.TrimSpace(l); l != "" {
				kept = append(kept, l)
			}
		}
		p.log = "log: " + strings.ToValidUTF8(strings.Join(kept, " | "), "?")
	}
	return p
}

// podEnd is how a test Pod stands: its phase, and how its first container that did not
// succeed ended or why it waits.
func podEnd(pod *corev1.Pod) string {
	s := "phase " + string(pod.Status.Phase)
	for _, c := range pod.Status.ContainerStatuses {
		switch {
		case c.State.Terminated != nil && c.State.Terminated.ExitCode != 0:
			t := c.State.Terminated
			return fmt.Sprintf("%s, container %s exited %d %s", s, c.Name, t.ExitCode, t.Reason)
		case c.State.Waiting != nil:
			return fmt.Sprintf("%s, container %s waiting: %s", s, c.Name, c.State.Waiting.Reason)
		}
	}
	for _, c := range pod.Status.Conditions {
		if c.Status != corev1.ConditionTrue && c.Message != "" {
			return fmt.Sprintf("%s, %s: %s", s, c.Type, oneLine(c.Message))
		}
	}
	return s
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// TestsEnded is when the last run of rel's tests ended, as Helm recorded it: the last test
// hook's end (its start, for a hook whose end Helm did not record); zero: none ran.
func TestsEnded(rel *view.Release) time.Time {
	var end time.Time
	if rel == nil {
		return end
	}
	for _, h := range rel.Hooks {
		if !h.HasEvent(string(release.HookTest)) {
			continue
		}
		at := h.LastRun.CompletedAt
		if at.IsZero() {
			at = h.LastRun.StartedAt
		}
		if at.After(end) {
			end = at
		}
	}
	return end
}

// Tests names the test hooks of a revision that ran, and those that failed.
func Tests(rel *view.Release) (ran, failed []string) {
	if rel == nil {
		return nil, nil
	}
	for _, h := range rel.Hooks {
		if !h.HasEvent(string(release.HookTest)) || h.LastRun.Phase == "" || h.LastRun.Phase == string(release.HookPhaseUnknown) {
			continue
		}
		ran = append(ran, h.Name)
		if h.LastRun.Phase == string(release.HookPhaseFailed) {
			failed = append(failed, h.Name)
		}
	}
	return ran, failed
}
