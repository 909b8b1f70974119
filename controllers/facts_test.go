package controllers

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"helm.sh/helm/v4/pkg/release/common"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/validation"

	rstatus "github.com/rudder-operator/rudder/api/status"
	"github.com/rudder-operator/rudder/internal/machine"
	"github.com/rudder-operator/rudder/internal/records"
)

// The release's facts live in its newest record's labels (records.Facts), not in the CR's
// status: a pass whose CR lost its status (written over, restored from a backup without it)
// decides as the pass before it did — no action taken again, the same failure held back with
// its count and time, each once-per-value annotation's value still handled — and reports them
// again. Helm's error is the one thing no label holds: the status's message then says the
// record holds the failure.
func TestPassWithItsStatusLostDecidesTheSame(t *testing.T) {
	boom := errors.New("quota exceeded")
	upgradeFails := func(h *harness) {
		h.seed(common.StatusDeployed, false, 0, unitUID)
		h.helm.upgradeErr, h.helm.stores = boom, true
	}
	for _, tc := range []struct {
		name   string
		opts   harnessOpts
		before func(h *harness)
		// unrecorded: the release has no record; the failure's message Memory keeps is
		// reported as the pass before reported it.
		unrecorded bool
	}{
		{name: "a failed upgrade held back", opts: harnessOpts{watch: "  remediation: {retries: 0}\n"}, before: upgradeFails},
		{name: "a failed upgrade with retries left", opts: harnessOpts{watch: "  remediation: {retries: 3}\n"}, before: upgradeFails},
		{name: "reconcile-at handled", before: func(h *harness) {
			upgradeFails(h)
			h.passOnce()
			h.annotate(machine.AnnotationReconcileAt, "1")
		}},
		{name: "reset-at handled", before: func(h *harness) {
			upgradeFails(h)
			h.passOnce()
			h.annotate(machine.AnnotationResetAt, "a")
		}},
		{name: "rollback-to done", before: func(h *harness) {
			h.seed(common.StatusSuperseded, false, 0, unitUID)
			h.seed(common.StatusDeployed, true, 0, unitUID)
			h.passOnce()
			h.annotate(machine.AnnotationRollbackTo, "1")
		}},
		{name: "rollback-to refused", opts: harnessOpts{annotations: map[string]string{machine.AnnotationRollbackTo: "9"}}},
		{name: "a failed install kept", before: func(h *harness) { h.seedKept(true) }},
		{name: "an install refused, no revision stored", before: func(h *harness) { h.helm.installErr = refused() }, unrecorded: true},
		{name: "a manual rollback kept", before: seedManualRollback},
		{name: "moved to this shard, its records not in this shard's cache",
			opts: harnessOpts{carried: []string{"rudder.dev/shard"}, labels: map[string]string{"rudder.dev/shard": "b"}},
			before: func(h *harness) {
				h.seed(common.StatusDeployed, true, 0, unitUID).Labels["rudder.dev/shard"] = "a"
				h.helm.hidden = true
				h.passOnce() // takes the CR on: finds the release in storage, adopts it
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, tc.opts)
			if tc.before != nil {
				tc.before(h)
			}
			_, _ = h.pass()
			want := factsReported(h.cr())
			wantMsg, _, _ := unstructured.NestedString(h.cr().Object, "status", "release", "failed", "message")
			h.helm.Calls()
			writes := h.helm.factWrites

			cur := h.cr()
			cur.Object["status"] = map[string]any{}
			if err := h.c.Status().Update(context.Background(), cur); err != nil {
				t.Fatal(err)
			}
			h.clock.Step(1) // no retry falls due meanwhile: back-offs are seconds
			_, _ = h.pass()
			if acted := actions(h.helm.Calls()); len(acted) > 0 {
				t.Errorf("the pass without its status acted again: %q", acted)
			}
			if got := factsReported(h.cr()); !reflect.DeepEqual(got, want) {
				t.Errorf("the pass without its status reported\n  %v\nthe pass before it\n  %v", got, want)
			}
			if h.helm.factWrites != writes {
				t.Errorf("the pass without its status wrote the facts %d times: the record has them", h.helm.factWrites-writes)
			}
			if msg, _, _ := unstructured.NestedString(h.cr().Object, "status", "release", "failed", "message"); strings.Contains(tc.name, "failed") &&
				!strings.Contains(msg, "as the release's record says") {
				t.Errorf("the failure's message: %q", msg)
			} else if tc.unrecorded && (msg == "" || msg != wantMsg) {
				t.Errorf("the failure's message: %q, the pass before reported %q", msg, wantMsg)
			}
		})
	}
}

// factsReported is what a CR's status reports of the release's facts: the Stalled condition,
// the failure held back (but Helm's error), and the values handled.
func factsReported(u *unstructured.Unstructured) []string {
	var out []string
	for _, c := range rstatus.ConditionsOf(u) {
		if c.Type == rstatus.TypeStalled {
			out = append(out, fmt.Sprintf("%s=%s/%s", c.Type, c.Status, c.Reason))
		}
	}
	rel, _, _ := unstructured.NestedMap(u.Object, "status", "release")
	if f, ok := rel["failed"].(map[string]any); ok {
		delete(f, "message")
	}
	for _, k := range []string{"failed", "rollbackRequest", "reconcileRequest", "resetRequest"} {
		out = append(out, fmt.Sprintf("%s: %v", k, rel[k]))
	}
	return out
}

// The facts a pass learns are written on the newest record before its status, in one patch,
// and only when they change: a pass that learns nothing new writes nothing, and an install or
// upgrade that succeeds stores its revision with the facts it leaves (no write after it).
func TestFactsAreWrittenOnTheNewestRecord(t *testing.T) {
	t.Parallel()
	clean := newHarness(t, harnessOpts{})
	clean.seed(common.StatusDeployed, false, 0, unitUID)
	clean.passOnce()
	if hist := clean.helm.Stored("ns", "w"); len(hist) != 2 || clean.helm.factWrites != 0 {
		t.Fatalf("an upgrade: %d revisions, %d writes of the facts after it", len(hist), clean.helm.factWrites)
	} else if f := records.FactsOf(hist[1].Labels); f == nil || f.Of != 2 || f.Applied == nil || f.Applied.Generation != 1 {
		t.Fatalf("the upgrade's revision carries %+v", f)
	}

	h := newHarness(t, harnessOpts{})
	h.seed(common.StatusDeployed, false, 0, unitUID)
	h.helm.upgradeErr, h.helm.stores = errors.New("quota exceeded"), true
	h.passOnce()
	hist := h.helm.Stored("ns", "w")
	newest := hist[len(hist)-1]
	f := records.FactsOf(newest.Labels)
	if f == nil || !f.Failed.Holds(records.Desired{ChartDigest: h.chartDigest, ValuesDigest: h.valuesDigest}) ||
		f.Failed.Cause != rstatus.ReasonUpgradeFailed || f.Failed.Count != 1 || !f.Failed.At.Equal(h.clock.Now().Truncate(1e9)) {
		t.Fatalf("revision %d (%s) carries the facts %+v (labels %v)", newest.Version, newest.Info.Status, f, newest.Labels)
	}
	writes := h.helm.factWrites
	h.passOnce()
	if h.helm.factWrites != writes {
		t.Fatalf("a pass that learned nothing wrote the facts again")
	}
	h.annotate(machine.AnnotationReconcileAt, "now")
	h.helm.upgradeErr = nil
	h.passOnce()
	hist = h.helm.Stored("ns", "w")
	newest = hist[len(hist)-1]
	if f := records.FactsOf(newest.Labels); f == nil || f.Failed != nil || f.ReconcileAt != records.HandledValue("now") {
		t.Fatalf("after the retried upgrade, revision %d carries %+v", newest.Version, f)
	}
}

// A pass whose facts cannot be written is retried, whatever it ended on: held back, it would
// never run again, and the next pass would not know the failure.
func TestFactsNotWrittenAreRetried(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{})
	h.seed(common.StatusDeployed, false, 0, unitUID)
	h.helm.upgradeErr, h.helm.stores = errors.New("quota exceeded"), true
	h.helm.factsErr = errors.New("etcdserver: leader changed")
	if got := outcomeOf(h.pass()); got != "retry" {
		t.Fatalf("a pass whose facts were not written: %s, want a retry", got)
	}
	h.helm.factsErr = nil
	h.helm.Calls()
	if got := outcomeOf(h.pass()); got != "terminal" {
		t.Fatalf("the pass after it: %s, want held back", got)
	}
	if calls := h.helm.Calls(); slices.Contains(calls, "Upgrade") {
		t.Fatalf("the failed pair was tried again: %q", calls)
	}
}

// An older rudder's record takes no facts from the CR's status: a failure in a status
// written over by hand with what no label holds is no fact (it holds nothing back), and is
// not written on the record (the API server would refuse the patch on every pass).
func TestFactsTakenOverFromAStatusAreLabelValues(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{})
	h.seed(common.StatusDeployed, false, 0, unitUID) // an older rudder's record: no facts
	h.failedBefore("Not a label: value", 1, time.Minute)
	h.passOnce()
	hist := h.helm.Stored("ns", "w")
	f := records.FactsOf(hist[len(hist)-1].Labels)
	if f == nil || f.Failed != nil {
		t.Fatalf("the record took over the facts %+v", f)
	}
	for k, v := range hist[len(hist)-1].Labels {
		if errs := validation.IsValidLabelValue(v); len(errs) > 0 {
			t.Errorf("label %s=%q: %v", k, v, errs)
		}
	}
}

// An install refused before Helm stored anything leaves no record to carry its facts: the
// passes of this process keep them (machine.Memory), and a process without them — rudder
// restarted, the CR's status lost too — renders the release again and is refused again: the
// same condition, and still no revision stored.
func TestARefusalIsRefusedAgainByANewProcess(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{})
	h.helm.installErr = refused()
	h.passOnce()
	want := h.conds(rstatus.TypeReleased, rstatus.TypeStalled)
	if want[1] != "Stalled=True/ChartInvalid" {
		t.Fatalf("the refused install: %v", want)
	}
	h.helm.Calls()

	h.r.memory.Forget(h.key) // what a new process remembers of the CR: nothing
	cur := h.cr()
	cur.Object["status"] = map[string]any{}
	if err := h.c.Status().Update(context.Background(), cur); err != nil {
		t.Fatal(err)
	}
	h.passOnce()
	if got := h.helm.Calls(); !slices.Equal(got, []string{"Last", "Install", "Last"}) {
		t.Errorf("a new process: Helm calls %q, want the install tried (and refused) again", got)
	}
	if got := h.conds(rstatus.TypeReleased, rstatus.TypeStalled); !slices.Equal(got, want) {
		t.Errorf("a new process reported %v, the process before it %v", got, want)
	}
	if hist := h.helm.Stored("ns", "w"); len(hist) != 0 {
		t.Errorf("a refused install stored %d revisions", len(hist))
	}
}

// No decision reads the CR's status: with no record and nothing in Memory, a status that
// reports a failure (an install's, or a refusal) holds nothing back; the pass installs.
func TestAStatusWithoutARecordHoldsNothingBack(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		reason string
		calls  []string
		stall  string
	}{
		{rstatus.ReasonInstallFailed, []string{"Last", "Install"}, "Stalled=False/InstallSucceeded"},
		{rstatus.ReasonChartInvalid, []string{"Last", "Install"}, "Stalled=False/InstallSucceeded"},
	} {
		t.Run(tc.reason, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, harnessOpts{watch: "  remediation: {retries: 2}\n"})
			h.failedBefore(tc.reason, 3, time.Hour)
			h.passOnce()
			if got := h.helm.Calls(); !slices.Equal(got, tc.calls) {
				t.Errorf("Helm calls %q, want %q", got, tc.calls)
			}
			if got := h.conds(rstatus.TypeStalled); got[0] != tc.stall {
				t.Errorf("%v, want %s", got, tc.stall)
			}
		})
	}
}
