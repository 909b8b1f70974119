package controllers_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	rolloutv1 "github.com/rudder-operator/rudder/api/rollout/v1alpha1"
	rstatus "github.com/rudder-operator/rudder/api/status"
	"github.com/rudder-operator/rudder/internal/cli"
	"github.com/rudder-operator/rudder/internal/crtest"
	"github.com/rudder-operator/rudder/internal/helm/helmtest"
	"github.com/rudder-operator/rudder/internal/machine"
	"github.com/rudder-operator/rudder/internal/records"
)

var rolloutGVK = schema.GroupVersionKind{Group: "test.rudder.dev", Version: "v1", Kind: "RolloutProbe"}

// TestRolloutInWaves edits the chart of a watch whose rollout policy is a one-CR canary, then
// 25 %, then the rest (settle 1s, healthTimeout 20s, maxFailures 0, onHalt rollback), with 20
// CRs, one of them held. A good edit reaches the 19 others in three waves, no CR before its
// wave; the held CR stays until its hold goes. A bad edit (Pods no node can run) moves the
// canary only, halts, and rolls it back: the other 19 never change, and one of them upgraded
// meanwhile keeps the chart of its own release.
func TestRolloutInWaves(t *testing.T) {
	ctx := context.Background()
	ns := crtest.NewNamespace(t, k8s, "rollout-")
	var names []string
	for i := range 20 {
		names = append(names, fmt.Sprintf("r%02d", i))
	}
	held := names[7]
	for _, n := range names {
		cr := crtest.NewCR(rolloutGVK, ns, n, map[string]any{})
		if n == held {
			cr.SetAnnotations(map[string]string{machine.AnnotationRolloutHold: "true"})
		}
		if err := k8s.Create(ctx, cr); err != nil {
			t.Fatal(err)
		}
	}
	for _, n := range names {
		crtest.WaitCondition(t, k8s, rolloutGVK, ns, n, rstatus.TypeReady, metav1.ConditionTrue, "", timeout)
	}
	// The waves, as the policy and the documented order say: the held CR aside, the first CR
	// by key, then up to 5 in all (25 % of 19, rounded up), then the rest.
	byKey := func(a, b string) int { return strings.Compare(machine.RolloutKey(ns, a), machine.RolloutKey(ns, b)) }
	order := slices.DeleteFunc(slices.Clone(names), func(n string) bool { return n == held })
	slices.SortFunc(order, byKey)
	waveOf := map[string]int32{}
	for i, n := range order {
		switch {
		case i == 0:
			waveOf[n] = 1
		case i < 5:
			waveOf[n] = 2
		default:
			waveOf[n] = 3
		}
	}
	canary := order[0]

	vol, src := filepath.Join(chartDir, "rollout"), filepath.Join(chartDir, "day2")
	b, err := os.ReadFile(filepath.Join(src, "templates", "all.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	good := strings.Replace(string(b), "tier: {{ .Values.tier | quote }}", "tier: {{ .Values.tier | quote }}\n  edition: \"2\"", 1)
	goodDigest := editChart(t, vol, src, good)
	ro := rolloutTo(t, goodDigest, rolloutv1.PhaseComplete, func(ro *rolloutv1.Rollout, revisions map[string]int) {
		for n, r := range revisions {
			if r > 1 && (n == held || waveOf[n] > ro.Status.Wave) {
				t.Fatalf("%s (wave %d, held %v) upgraded while rollout %s was at wave %d", n, waveOf[n], n == held, ro.Name, ro.Status.Wave)
			}
		}
	}, ns, names)
	if s := ro.Status; s.Total != 20 || s.Moved != 19 || s.Ready != 19 || s.Held != 1 || s.Failed != 0 || s.Wave != 3 {
		t.Errorf("rollout status: %+v", s)
	}
	if got := rolloutEvents(t, ro.Name, "WaveStarted"); got != 3 {
		t.Errorf("%d WaveStarted events, want 3", got)
	}
	for _, n := range names {
		want := 2
		if n == held {
			want = 1
		}
		if h := helmtest.History(t, cluster.Kubeconfig, ns, n); len(h) != want || h[len(h)-1].Info.Status != "deployed" {
			t.Errorf("%s: %s", n, describe(h))
		}
	}
	u := crtest.WaitCondition(t, k8s, rolloutGVK, ns, held, rstatus.TypeRollout, metav1.ConditionFalse, rstatus.ReasonRolloutHeld, timeout)
	if c := crtest.Condition(u, rstatus.TypeRollout); !strings.Contains(c.Message, machine.AnnotationRolloutHold) {
		t.Errorf("the held CR's Rollout condition does not say why: %s", c.Message)
	}
	// The hold goes: the CR joins the complete rollout.
	patch(t, rolloutGVK, ns, held, `{"metadata":{"annotations":{"`+machine.AnnotationRolloutHold+`":null}}}`)
	onChart(t, rolloutGVK, ns, held, goodDigest)
	if h := helmtest.History(t, cluster.Kubeconfig, ns, held); len(h) != 2 {
		t.Errorf("%s after its hold went: %s", held, describe(h))
	}

	// The hold is gone: the next rollout's waves order all 20 CRs, and its canary is the first
	// of them by key, which is the once-held CR when its key comes first.
	order = slices.SortedFunc(slices.Values(names), byKey)
	canary = order[0]

	// A bad edit: the canary's Pods can never be scheduled.
	bad := strings.Replace(good, "    spec:\n      containers:", "    spec:\n      nodeSelector: {rudder.dev/no-such-node: \"true\"}\n      containers:", 1)
	if bad == good {
		t.Fatal("the bad edit changed nothing")
	}
	badDigest := editChart(t, vol, src, bad)
	ro = rolloutTo(t, badDigest, rolloutv1.PhaseRolledBack, func(ro *rolloutv1.Rollout, revisions map[string]int) {
		for n, r := range revisions {
			if r > 2 && n != canary {
				t.Fatalf("%s (wave %d) upgraded while rollout %s was at wave %d", n, waveOf[n], ro.Name, ro.Status.Wave)
			}
		}
	}, ns, names)
	if s := ro.Status; s.Failed != 1 || len(s.FailedCRs) != 1 || !strings.HasPrefix(s.FailedCRs[0], ns+"/"+canary+":") || s.Wave != 1 {
		t.Errorf("halted rollout status: %+v", s)
	}
	h := helmtest.History(t, cluster.Kubeconfig, ns, canary)
	if len(h) != 4 || h[3].Info.Status != "deployed" || !strings.Contains(h[3].Info.Description, "rollback to revision 2") {
		t.Fatalf("the canary: %s", describe(h))
	}
	var dep appsv1.Deployment
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: canary}, &dep); err != nil || len(dep.Spec.Template.Spec.NodeSelector) != 0 {
		t.Errorf("the canary's Deployment after the rollback: %v %v", err, dep.Spec.Template.Spec.NodeSelector)
	}
	for _, n := range order[1:] {
		if h := helmtest.History(t, cluster.Kubeconfig, ns, n); len(h) != 2 {
			t.Errorf("%s changed in a halted rollout: %s", n, describe(h))
		}
	}
	// A CR the rollout did not move is upgraded with the chart of its own release.
	other := order[5]
	patch(t, rolloutGVK, ns, other, `{"spec":{"replicas":2}}`)
	crtest.Eventually(t, other+" upgraded with its own release's chart", timeout, func(ctx context.Context) (bool, error) {
		h := helmtest.History(t, cluster.Kubeconfig, ns, other)
		return len(h) == 3 && h[2].Info.Status == "deployed", nil
	})
	h = helmtest.History(t, cluster.Kubeconfig, ns, other)
	if d := h[2].Labels[records.LabelChartDigest]; d != goodDigest {
		t.Errorf("%s revision 3 is of chart %s, want its own release's %s", other, d, goodDigest)
	}
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: other}, &dep); err != nil || len(dep.Spec.Template.Spec.NodeSelector) != 0 || *dep.Spec.Replicas != 2 {
		t.Errorf("%s's Deployment: %v %v", other, err, dep.Spec)
	}
	u = crtest.WaitCondition(t, k8s, rolloutGVK, ns, other, rstatus.TypeRollout, metav1.ConditionFalse, rstatus.ReasonRolloutHalted, timeout)
	if c := crtest.Condition(u, rstatus.TypeRollout); !strings.Contains(c.Message, ro.Name) {
		t.Errorf("Rollout condition of %s: %s", other, c.Message)
	}
	// A CR made while the rollout is halted gets the chart on disk.
	if err := k8s.Create(ctx, crtest.NewCR(rolloutGVK, ns, "newcomer", map[string]any{})); err != nil {
		t.Fatal(err)
	}
	crtest.Eventually(t, "the newcomer installed", timeout, func(context.Context) (bool, error) {
		h := helmtest.History(t, cluster.Kubeconfig, ns, "newcomer")
		return len(h) == 1 && h[0].Labels[records.LabelChartDigest] == badDigest, nil
	})
	if err := k8s.Delete(ctx, crtest.NewCR(rolloutGVK, ns, "newcomer", nil)); err != nil {
		t.Fatal(err)
	}

	// Two edits in a row: the second supersedes the first's rollout, and every CR ends on it.
	third := strings.Replace(good, `edition: "2"`, `edition: "3"`, 1)
	thirdDigest := editChart(t, vol, src, third)
	rolloutTo(t, thirdDigest, rolloutv1.PhaseProgressing, func(*rolloutv1.Rollout, map[string]int) {}, ns, nil)
	fourth := strings.Replace(good, `edition: "2"`, `edition: "4"`, 1)
	fourthDigest := editChart(t, vol, src, fourth)
	superseded := rolloutTo(t, thirdDigest, rolloutv1.PhaseSuperseded, func(*rolloutv1.Rollout, map[string]int) {}, ns, nil)
	if !strings.Contains(superseded.Status.Message, records.DisplayDigest(fourthDigest)) {
		t.Errorf("the superseded rollout does not name its successor: %s", superseded.Status.Message)
	}
	if got := rolloutEvents(t, superseded.Name, rolloutv1.PhaseSuperseded); got != 1 {
		t.Errorf("%d Superseded events, want 1", got)
	}
	rolloutTo(t, fourthDigest, rolloutv1.PhaseComplete, func(*rolloutv1.Rollout, map[string]int) {}, ns, nil)
	for _, n := range names {
		onChart(t, rolloutGVK, ns, n, fourthDigest)
	}
}

// editChart publishes content as the chart's template into vol and returns the digest (label
// form) the watch's CRs move to.
func editChart(t *testing.T, vol, src, content string) string {
	t.Helper()
	before, _ := charts.Get(vol)
	if err := swapChart(vol, src, map[string]string{"templates/all.yaml": content}); err != nil {
		t.Fatal(err)
	}
	crtest.Eventually(t, "the chart source to load the edit", timeout, func(context.Context) (bool, error) {
		st, _ := charts.Get(vol)
		return st.Current.Digest != before.Current.Digest, nil
	})
	st, _ := charts.Get(vol)
	return records.LabelDigest(st.Current.Digest)
}

// rolloutTo waits until the Rollout to digest is in phase, checking each time it looks that
// check holds of the rollout and of the CRs' revision counts (read before the rollout).
func rolloutTo(t *testing.T, digest, phase string, check func(*rolloutv1.Rollout, map[string]int), ns string, names []string) *rolloutv1.Rollout {
	t.Helper()
	name := rolloutv1.Name(rolloutGVK, "", digest)
	ro := &rolloutv1.Rollout{}
	said := ""
	crtest.Eventually(t, "rollout "+name+" "+phase, 3*time.Minute, func(ctx context.Context) (bool, error) {
		revisions := map[string]int{}
		for _, n := range names {
			revisions[n] = len(helmtest.History(t, cluster.Kubeconfig, ns, n))
		}
		if err := k8s.Get(ctx, client.ObjectKey{Name: name}, ro); err != nil {
			return false, err
		}
		if ro.Status.Message != said {
			said = ro.Status.Message
			t.Logf("rollout %s: %s: %s", name, ro.Status.Phase, said)
		}
		check(ro, revisions)
		return ro.Status.Phase == phase, nil
	})
	return ro
}

// rolloutEvents counts the Events of reason about the rollout.
func rolloutEvents(t *testing.T, name, reason string) int {
	t.Helper()
	var list eventsv1.EventList
	if err := k8s.List(context.Background(), &list, client.InNamespace(corev1.NamespaceDefault)); err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range list.Items {
		if e.Regarding.Name == name && e.Reason == reason {
			n++
		}
	}
	return n
}

// onChart waits until the CR is Ready on the chart of digest.
func onChart(t *testing.T, gvk schema.GroupVersionKind, ns, name, digest string) {
	t.Helper()
	crtest.Eventually(t, name+" Ready on chart "+digest, timeout, func(ctx context.Context) (bool, error) {
		u, err := crtest.Get(ctx, k8s, gvk, ns, name)
		if err != nil {
			return false, err
		}
		d, _, _ := unstructured.NestedString(u.Object, "status", "release", "chartDigest")
		c := crtest.Condition(u, rstatus.TypeReady)
		return d == digest && c != nil && c.Status == metav1.ConditionTrue, nil
	})
}

// TestRolloutWaitsForItsPreview: a watch whose rollout policy starts paused moves no CR on a
// chart edit until `rudder diff --cluster --record` has recorded the edit's preview on the
// Rollout and someone approves it (rudder.dev/paused "false"); then every CR moves.
func TestRolloutWaitsForItsPreview(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	gvk := schema.GroupVersionKind{Group: "test.rudder.dev", Version: "v1", Kind: "PausedProbe"}
	ns := crtest.NewNamespace(t, k8s, "paused-")
	names := []string{"p1", "p2", "p3"}
	vol, to := editedFleet(t, gvk, ns, "paused", names)
	name := rolloutv1.Name(gvk, "", to)
	ro := &rolloutv1.Rollout{}
	crtest.Eventually(t, "rollout "+name+" paused for its preview", timeout, func(ctx context.Context) (bool, error) {
		err := k8s.Get(ctx, client.ObjectKey{Name: name}, ro)
		return err == nil && ro.Status.Phase == rolloutv1.PhasePaused && strings.Contains(ro.Status.Message, "preview is recorded"), err
	})
	// Approved before its preview: still paused, and nothing moves.
	patchRollout(t, name, `{"metadata":{"annotations":{"`+rolloutv1.AnnotationPaused+`":"false"}}}`)
	crtest.Eventually(t, "rollout "+name+" approved, waiting for its preview", timeout, func(ctx context.Context) (bool, error) {
		err := k8s.Get(ctx, client.ObjectKey{Name: name}, ro)
		return err == nil && ro.Status.Phase == rolloutv1.PhasePaused && strings.HasPrefix(ro.Status.Message, "approved, but paused"), err
	})
	for _, n := range names {
		if h := helmtest.History(t, cluster.Kubeconfig, ns, n); len(h) != 1 {
			t.Fatalf("%s moved before its rollout was previewed: %s", n, describe(h))
		}
	}

	wf := filepath.Join(t.TempDir(), "watches.yaml")
	if err := os.WriteFile(wf, []byte("- {group: test.rudder.dev, version: v1, kind: PausedProbe, chart: "+vol+", rollout: {waves: [{count: 1}], paused: true}}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	code := cli.Run(ctx, []string{"diff", "--cluster", "--record", "--kubeconfig", cluster.Kubeconfig, "--watches-file", wf}, cli.Env{Stdout: &stdout, Stderr: &stderr})
	want := "# PausedProbe.test.rudder.dev: recorded on rollout " + name + ": 3 CRs, 3 changed, 0 unchanged, 0 failing"
	if code != 1 || !strings.Contains(stdout.String(), want) {
		t.Fatalf("rudder diff --cluster --record: exit %d, want 1 and %q\n%s%s", code, want, stdout.String(), stderr.String())
	}
	// Previewed and approved (the approval given before still holds): every CR moves.
	crtest.Eventually(t, "rollout "+name+" Complete", 2*time.Minute, func(ctx context.Context) (bool, error) {
		err := k8s.Get(ctx, client.ObjectKey{Name: name}, ro)
		return err == nil && ro.Status.Phase == rolloutv1.PhaseComplete, err
	})
	var p rolloutv1.Preview
	if err := json.Unmarshal([]byte(ro.Annotations[rolloutv1.AnnotationPreview]), &p); err != nil || p.CRs != 3 || p.Changed != 3 {
		t.Errorf("the preview on the Rollout: %+v %v", p, err)
	}
	for _, n := range names {
		h := helmtest.History(t, cluster.Kubeconfig, ns, n)
		if len(h) != 2 || h[1].Labels[records.LabelChartDigest] != to {
			t.Errorf("%s: %s", n, describe(h))
		}
	}
}

// editedFleet makes the CRs names of gvk in ns, waits until each is Ready, then edits the day2
// chart of the kind's volume (an "edition" label) and returns the volume and the digest (label
// form) of the edit.
func editedFleet(t *testing.T, gvk schema.GroupVersionKind, ns, volume string, names []string) (string, string) {
	t.Helper()
	for _, n := range names {
		if err := k8s.Create(context.Background(), crtest.NewCR(gvk, ns, n, map[string]any{})); err != nil {
			t.Fatal(err)
		}
	}
	for _, n := range names {
		crtest.WaitCondition(t, k8s, gvk, ns, n, rstatus.TypeReady, metav1.ConditionTrue, "", timeout)
	}
	vol, src := filepath.Join(chartDir, volume), filepath.Join(chartDir, "day2")
	b, err := os.ReadFile(filepath.Join(src, "templates", "all.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	return vol, editChart(t, vol, src, strings.Replace(string(b), "tier: {{ .Values.tier | quote }}", "tier: {{ .Values.tier | quote }}\n  edition: \"2\"", 1))
}

func patchRollout(t *testing.T, name, patch string) {
	t.Helper()
	ro := &rolloutv1.Rollout{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if err := k8s.Patch(context.Background(), ro, client.RawPatch(types.MergePatchType, []byte(patch))); err != nil {
		t.Fatal(err)
	}
}

// TestRolloutPromotedAndAborted: a watch whose waves never open by themselves (settle 1h)
// moves its canary and waits; rudder.dev/promote opens the next wave at once, once per value;
// rudder.dev/abort halts the rollout, and with onHalt hold the CRs it moved stay on the new
// chart and the one it had not reached stays where it was.
func TestRolloutPromotedAndAborted(t *testing.T) {
	t.Parallel()
	gvk := schema.GroupVersionKind{Group: "test.rudder.dev", Version: "v1", Kind: "GatedProbe"}
	ns := crtest.NewNamespace(t, k8s, "gated-")
	order := []string{"g1", "g2", "g3"}
	_, to := editedFleet(t, gvk, ns, "gated", order)
	slices.SortFunc(order, func(a, b string) int {
		return strings.Compare(machine.RolloutKey(ns, a), machine.RolloutKey(ns, b))
	})
	name := rolloutv1.Name(gvk, "", to)
	revisions := func(want ...int) {
		t.Helper()
		for i, n := range order {
			if h := helmtest.History(t, cluster.Kubeconfig, ns, n); len(h) != want[i] {
				t.Fatalf("%s (wave %d): %d revisions%s, want %d", n, i+1, len(h), describe(h), want[i])
			}
		}
	}
	// settling waits until the coordinator has seen every CR of wave Ready and has looked at
	// the gate again since (its message counts the settle time down), and returns the Rollout.
	settling := func(wave int32) *rolloutv1.Rollout {
		t.Helper()
		ro, first := &rolloutv1.Rollout{}, ""
		crtest.Eventually(t, fmt.Sprintf("rollout %s settling wave %d, looked at twice", name, wave), timeout, func(ctx context.Context) (bool, error) {
			if err := k8s.Get(ctx, client.ObjectKey{Name: name}, ro); err != nil {
				return false, err
			}
			if ro.Status.Wave != wave || !strings.Contains(ro.Status.Message, "settling for") {
				return false, nil
			}
			if first == "" {
				first = ro.Status.Message
			}
			return ro.Status.Message != first, nil
		})
		return ro
	}
	settling(1)
	revisions(2, 1, 1)

	patchRollout(t, name, `{"metadata":{"annotations":{"`+rolloutv1.AnnotationPromote+`":"a"}}}`)
	ro := settling(2)
	if ro.Status.Promoted != "a" || rolloutEvents(t, name, "Promoted") != 1 {
		t.Errorf("promoted: status %q, %d Promoted events", ro.Status.Promoted, rolloutEvents(t, name, "Promoted"))
	}
	// The same value again opens nothing: the coordinator looked at the gate twice since.
	revisions(2, 2, 1)

	patchRollout(t, name, `{"metadata":{"annotations":{"`+rolloutv1.AnnotationAbort+`":"true"}}}`)
	crtest.Eventually(t, "rollout "+name+" Halted", timeout, func(ctx context.Context) (bool, error) {
		err := k8s.Get(ctx, client.ObjectKey{Name: name}, ro)
		return err == nil && ro.Status.Phase == rolloutv1.PhaseHalted, err
	})
	if !strings.Contains(ro.Status.Message, "aborted") {
		t.Errorf("the halted rollout does not say it was aborted: %s", ro.Status.Message)
	}
	u := crtest.WaitCondition(t, k8s, gvk, ns, order[2], rstatus.TypeRollout, metav1.ConditionFalse, rstatus.ReasonRolloutHalted, timeout)
	if c := crtest.Condition(u, rstatus.TypeRollout); !strings.Contains(c.Message, name) {
		t.Errorf("Rollout condition of %s: %s", order[2], c.Message)
	}
	revisions(2, 2, 1)
	for _, n := range order[:2] {
		onChart(t, gvk, ns, n, to)
	}
}
