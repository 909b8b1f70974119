package controllers

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	clocktesting "k8s.io/utils/clock/testing"

	rolloutv1 "github.com/rudder-operator/rudder/api/rollout/v1alpha1"
	"github.com/rudder-operator/rudder/internal/machine"
	"github.com/rudder-operator/rudder/internal/watches"
)

// fleet is a coordinator of a watch with the rollout policy pol, and 20 CRs on chart "old"
// (r07 held), sorted by their keys as the coordinator sorts them.
func fleet(t *testing.T, pol string) (*coordinator, *clocktesting.FakeClock, []member) {
	t.Helper()
	ws, err := watches.Parse([]byte("- {group: a.io, version: v1, kind: A, chart: c, rollout: "+pol+"}"), t.TempDir(), func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	clk := clocktesting.NewFakeClock(time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC))
	r := &Reconciler{opts: Options{Watch: ws[0], Clock: clk, Recorder: &events.FakeRecorder{}}, gvk: ws[0].GroupVersionKind()}
	var ms []member
	for i := range 20 {
		n := fmt.Sprintf("r%02d", i)
		ms = append(ms, member{key: types.NamespacedName{Namespace: "a", Name: n}, order: machine.RolloutKey("a", n), digest: "old", held: n == "r07",
			labels: map[string]string{"canary": fmt.Sprint(i < 2)}})
	}
	slices.SortFunc(ms, func(a, b member) int { return strings.Compare(a.order, b.order) })
	return &coordinator{r: r, steps: waveSteps{r: r}}, clk, ms
}

// moveAdmitted puts every CR the rollout admits on its chart, Ready or not.
func moveAdmitted(c *coordinator, ro *rolloutv1.Rollout, ms []member, ready bool) {
	for i := range ms {
		if !ms[i].held && machine.Admits(c.r.opts.Watch.Rollout, ro, ms[i].key.Namespace, ms[i].key.Name, ms[i].labels) {
			ms[i].digest, ms[i].ready = "new", ready
		}
	}
}

func admittedNames(c *coordinator, ro *rolloutv1.Rollout, ms []member) []string {
	var out []string
	for _, m := range ms {
		if !m.held && machine.Admits(c.r.opts.Watch.Rollout, ro, m.key.Namespace, m.key.Name, m.labels) {
			out = append(out, m.key.Name)
		}
	}
	return out
}

// The waves of a one-CR canary, then 25 %, then the rest: each starts once the CRs before are
// Ready and have settled, in the order of the keys, the held CR aside.
func TestRolloutWaves(t *testing.T) {
	t.Parallel()
	c, clk, ms := fleet(t, "{waves: [{count: 1}, {percent: 25}], settle: 10s}")
	ro := &rolloutv1.Rollout{ObjectMeta: metav1.ObjectMeta{Name: "ro"}, Spec: rolloutv1.RolloutSpec{From: "old", To: "new"}}
	eligible := slices.DeleteFunc(slices.Clone(ms), func(m member) bool { return m.held })
	var want []string
	moved := 0
	for _, size := range []int{1, 5, 19} {
		want = want[:0]
		for _, m := range eligible[:size] {
			want = append(want, m.key.Name)
		}
		if size == 1 {
			c.steps.advance(ro, ms)
		}
		if got := admittedNames(c, ro, ms); !slices.Equal(got, want) {
			t.Fatalf("wave %d admits %v, want %v", ro.Status.Wave, got, want)
		}
		if len(c.steps.moving) != size-moved {
			t.Fatalf("wave %d queued passes of %v, want of the %d of %v not moved yet", ro.Status.Wave, c.steps.moving, size-moved, want)
		}
		clear(c.steps.moving)
		moved = size
		// Not Ready yet: the wave waits, and counts nobody failed.
		moveAdmitted(c, ro, ms, false)
		if wait := c.steps.advance(ro, ms); wait != coordinatorPoll || ro.Status.Phase != rolloutv1.PhaseProgressing || ro.Status.ReadySince != nil {
			t.Fatalf("wave %d not Ready: wait %s, status %+v", ro.Status.Wave, wait, ro.Status)
		}
		// Ready: it settles for 10 s, then the next wave starts (or the rollout completes).
		moveAdmitted(c, ro, ms, true)
		wave := ro.Status.Wave
		if wait := c.steps.advance(ro, ms); wait != coordinatorPoll || ro.Status.Wave != wave || ro.Status.ReadySince == nil {
			t.Fatalf("wave %d Ready: wait %s, status %+v", wave, wait, ro.Status)
		}
		clk.Step(10 * time.Second)
		c.steps.advance(ro, ms)
	}
	if s := ro.Status; s.Phase != rolloutv1.PhaseComplete || s.Wave != 3 || s.Total != 20 || s.Moved != 19 || s.Ready != 19 || s.Held != 1 {
		t.Fatalf("status %+v", s)
	}
}

// A wave's failures beyond maxFailures halt the rollout; with onHalt rollback it ends
// RolledBack once no moved CR is left on the new chart.
func TestRolloutHalts(t *testing.T) {
	t.Parallel()
	c, clk, ms := fleet(t, "{waves: [{selector: {matchLabels: {canary: 'true'}}}, {percent: 50}], maxFailures: 1, healthTimeout: 1m, onHalt: rollback}")
	ro := &rolloutv1.Rollout{ObjectMeta: metav1.ObjectMeta{Name: "ro"}, Spec: rolloutv1.RolloutSpec{From: "old", To: "new"}}
	c.steps.advance(ro, ms)
	if got := admittedNames(c, ro, ms); len(got) != 2 || !slices.Contains(got, "r00") || !slices.Contains(got, "r01") {
		t.Fatalf("the canary wave admits %v, want the two CRs its selector picks", got)
	}
	moveAdmitted(c, ro, ms, false)
	c.steps.advance(ro, ms) // the health timeout counts from here
	clk.Step(61 * time.Second)
	clear(c.steps.moving)
	c.steps.advance(ro, ms)
	if s := ro.Status; s.Phase != rolloutv1.PhaseHalted || s.Failed != 2 || len(s.FailedCRs) != 2 || !strings.Contains(s.FailedCRs[0], "not Ready on chart new within 1m0s") {
		t.Fatalf("two failures past a budget of one: %+v", s)
	}
	// The moved CRs get a pass to go back, the others one to say the rollout halted; a held
	// CR none.
	for _, m := range ms {
		if c.steps.moving[m.key] == m.held {
			t.Fatalf("%s (held %v, on %s): queued %v after the halt", m.key, m.held, m.digest, c.steps.moving[m.key])
		}
	}
	for i := range ms {
		if ms[i].digest == "new" {
			ms[i].digest = "old"
		}
	}
	c.steps.advance(ro, ms)
	if ro.Status.Phase != rolloutv1.PhaseRolledBack {
		t.Fatalf("every moved CR back: %+v", ro.Status)
	}
}

// A policy that starts paused waits for the preview, then for the approval.
func TestRolloutWaitsForItsPreview(t *testing.T) {
	t.Parallel()
	c, _, ms := fleet(t, "{waves: [{count: 1}], paused: true}")
	ro := &rolloutv1.Rollout{ObjectMeta: metav1.ObjectMeta{Name: "ro", Annotations: map[string]string{rolloutv1.AnnotationPaused: "false"}},
		Spec: rolloutv1.RolloutSpec{From: "old", To: "new"}}
	ro.Status.Phase = rolloutv1.PhasePaused
	c.steps.advance(ro, ms)
	if ro.Status.Phase != rolloutv1.PhasePaused || !strings.HasPrefix(ro.Status.Message, "approved, but paused until its preview") {
		t.Fatalf("approved before its preview: %+v", ro.Status)
	}
	ro.Annotations[rolloutv1.AnnotationPreview] = `{"crs":20,"changed":19,"unchanged":1,"failing":0}`
	ro.Annotations[rolloutv1.AnnotationPaused] = "true"
	c.steps.advance(ro, ms)
	if ro.Status.Phase != rolloutv1.PhasePaused || !strings.Contains(ro.Status.Message, `"changed":19`) {
		t.Fatalf("previewed, not approved: %+v", ro.Status)
	}
	ro.Annotations[rolloutv1.AnnotationPaused] = "false"
	c.steps.advance(ro, ms)
	if ro.Status.Phase != rolloutv1.PhaseProgressing || ro.Status.Wave != 1 {
		t.Fatalf("previewed and approved: %+v", ro.Status)
	}
}

// The Rollout's annotations: pause, resume, promote (once per value) and abort.
func TestRolloutAnnotations(t *testing.T) {
	t.Parallel()
	c, _, ms := fleet(t, "{waves: [{count: 1}], settle: 1h}")
	ro := &rolloutv1.Rollout{ObjectMeta: metav1.ObjectMeta{Name: "ro", Annotations: map[string]string{rolloutv1.AnnotationPaused: "true"}},
		Spec: rolloutv1.RolloutSpec{From: "old", To: "new"}}
	c.steps.advance(ro, ms)
	if ro.Status.Phase != rolloutv1.PhasePaused || len(admittedNames(c, ro, ms)) != 0 {
		t.Fatalf("a rollout made paused moves nobody: %+v", ro.Status)
	}
	ro.Annotations[rolloutv1.AnnotationPaused] = "false"
	c.steps.advance(ro, ms)
	if ro.Status.Phase != rolloutv1.PhaseProgressing || ro.Status.Wave != 1 {
		t.Fatalf("resumed: %+v", ro.Status)
	}
	moveAdmitted(c, ro, ms, false)
	ro.Annotations[rolloutv1.AnnotationPromote] = "now"
	c.steps.advance(ro, ms)
	if ro.Status.Wave != 2 || ro.Status.Promoted != "now" {
		t.Fatalf("promote skips the gates of wave 1: %+v", ro.Status)
	}
	c.steps.advance(ro, ms)
	if ro.Status.Wave != 2 {
		t.Fatalf("a promote value works once: %+v", ro.Status)
	}
	ro.Annotations[rolloutv1.AnnotationAbort] = "true"
	c.steps.advance(ro, ms)
	if ro.Status.Phase != rolloutv1.PhaseHalted || !strings.Contains(ro.Status.Message, "aborted") {
		t.Fatalf("abort halts: %+v", ro.Status)
	}
}
