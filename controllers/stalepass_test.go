package controllers

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"helm.sh/helm/v4/pkg/release/common"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"

	rstatus "github.com/rudder-operator/rudder/api/status"
	"github.com/rudder-operator/rudder/internal/machine"
	"github.com/rudder-operator/rudder/internal/records"
)

// A pass whose CR comes from a cache that does not show the status the pass before it wrote
// makes the decision a pass reading the newest CR makes: no action taken again, the same
// conditions (type, status, reason) and status.release written. One case per fact a decision
// or the status reads from what an earlier pass recorded: a held-back failure (and its count),
// each nudge's handled value, a rollback-to value handled (done or refused), a revision
// tested, and the action that made the revision (Released's reason, from its record's
// rudder.dev/action).
func TestPassBehindTheCacheDecidesTheSame(t *testing.T) {
	boom := errors.New("quota exceeded")
	for _, tc := range []struct {
		name string
		opts harnessOpts
		// before brings the release to the state the acting pass starts from; between changes
		// what the next pass would meet (an install that would now succeed), so that acting
		// again would show.
		before, between func(h *harness)
	}{
		{name: "a failed install held back",
			before:  func(h *harness) { h.helm.installErr, h.helm.stores = boom, true },
			between: func(h *harness) { h.helm.installErr = nil }},
		{name: "reconcile-at handled",
			before: func(h *harness) {
				h.helm.installErr, h.helm.stores = boom, true
				h.passOnce()
				h.annotate(machine.AnnotationReconcileAt, "1")
			},
			between: func(h *harness) { h.helm.installErr = nil }},
		{name: "reset-at handled",
			before: func(h *harness) {
				h.helm.installErr, h.helm.stores = boom, true
				h.passOnce()
				h.helm.installErr = nil
				h.annotate(machine.AnnotationResetAt, "a")
			}},
		{name: "rollback-to done",
			before: func(h *harness) {
				h.seed(common.StatusSuperseded, false, 0, unitUID)
				h.seed(common.StatusDeployed, true, 0, unitUID)
				h.passOnce()
				h.annotate(machine.AnnotationRollbackTo, "1")
			}},
		{name: "rollback-to refused", opts: harnessOpts{annotations: map[string]string{machine.AnnotationRollbackTo: "9"}}},
		{name: "tested", opts: harnessOpts{chart: "tested", watch: "  test: {enable: true}\n"}},
		{name: "an install refused, no revision stored",
			before:  func(h *harness) { h.helm.installErr = refused() },
			between: func(h *harness) { h.helm.installErr = nil }},
		{name: "a manual rollback kept", before: seedManualRollback},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, tc.opts)
			if tc.before != nil {
				tc.before(h)
			}
			stale := h.cr()
			_, _ = h.pass()
			want := statusFacts(h.cr())
			if tc.between != nil {
				tc.between(h)
			}
			h.helm.Calls()

			h.behind.serve(stale)
			_, _ = h.pass()
			if n := h.behind.conflicts.Load(); n != 0 {
				t.Errorf("the pass behind the cache wrote over an older version of the CR %d times", n)
			}
			if acted := actions(h.helm.Calls()); len(acted) > 0 {
				t.Errorf("the pass behind the cache acted again: %q", acted)
			}
			if got := statusFacts(h.cr()); !reflect.DeepEqual(got, want) {
				t.Errorf("the pass behind the cache wrote\n  %v\nthe pass before it\n  %v", got, want)
			}
		})
	}
}

// A pass whose cache is behind a version of the CR this process did not write (rudder
// restarted, the watch of CRs lagging) finds out by the conflict of its finalizer write: it
// ends without acting, and the cache's next version of the CR takes it again at once — an
// update crChanged otherwise filters (rudder's own finalizer and status writes) — not a
// back-off that grows while the cache lags.
func TestPassBehindAnotherWriteWaitsForTheCache(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{})
	stale := h.cr()
	if _, err := h.pass(); err != nil {
		t.Fatal(err)
	}
	h.r.statuses.forget(h.key) // what a new rudder process knows of its writes: nothing
	h.helm.Calls()

	h.behind.serve(stale)
	res, err := h.pass()
	if err != nil || res.RequeueAfter <= 0 {
		t.Fatalf("a pass behind the cache ended with %+v, %v; want no error and a periodic pass as backstop", res, err)
	}
	if n := h.behind.conflicts.Load(); n != 1 {
		t.Fatalf("%d conflicts, want the finalizer write's", n)
	}
	if acted := actions(h.helm.Calls()); len(acted) > 0 {
		t.Fatalf("the pass behind the cache acted: %q", acted)
	}
	caughtUp := event.UpdateEvent{ObjectOld: stale, ObjectNew: h.cr()}
	pred := watchEvents{h.r}.crChanged()
	if !pred.Update(caughtUp) {
		t.Fatal("the cache's newer version of the CR did not take it again")
	}
	if pred.Update(caughtUp) {
		t.Fatal("a status and finalizer write took the CR again once the cache had caught up")
	}
}

// behindCache is a client whose next read of a CR, once served, shows it as a cache that has
// not seen the last writes (the pass's finalizer and status writes) does: the CR as an older
// read of it had it, at that read's version.
type behindCache struct {
	client.Client
	stale *unstructured.Unstructured
	// conflicts counts the writes the API server refused as made over an older version.
	conflicts atomic.Int32
}

// serve makes the next read of u's CR show u.
func (b *behindCache) serve(u *unstructured.Unstructured) { b.stale = u.DeepCopy() }

func (b *behindCache) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok || b.stale == nil || client.ObjectKeyFromObject(b.stale) != key {
		return b.Client.Get(ctx, key, obj, opts...)
	}
	b.stale.DeepCopyInto(u)
	b.stale = nil
	return nil
}

func (b *behindCache) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
	err := b.Client.Patch(ctx, obj, patch, opts...)
	if apierrors.IsConflict(err) {
		b.conflicts.Add(1)
	}
	return err
}

// actions are the calls of Helm among calls that act on the release (not its reads).
func actions(calls []string) []string {
	var out []string
	for _, call := range calls {
		if name, _, _ := strings.Cut(call, " "); slices.Contains([]string{"Install", "Upgrade", "Rollback", "Test", "Unlock", "Uninstall", "Supersede"}, name) {
			out = append(out, call)
		}
	}
	return out
}

// statusFacts are a CR's conditions as "Type=Status/Reason" and its status.release.
func statusFacts(u *unstructured.Unstructured) []string {
	var out []string
	for _, c := range rstatus.ConditionsOf(u) {
		out = append(out, fmt.Sprintf("%s=%s/%s", c.Type, c.Status, c.Reason))
	}
	slices.Sort(out)
	rel, _, _ := unstructured.NestedMap(u.Object, "status", "release")
	return append(out, fmt.Sprintf("release: %v", rel))
}

// passOnce runs a pass whose outcome the case does not look at (its status does).
func (h *harness) passOnce() {
	h.t.Helper()
	_, _ = h.pass()
}

// annotate sets one annotation of the CR.
func (h *harness) annotate(k, v string) {
	h.t.Helper()
	u := h.cr()
	a := u.GetAnnotations()
	if a == nil {
		a = map[string]string{}
	}
	a[k] = v
	u.SetAnnotations(a)
	if err := h.c.Update(context.Background(), u); err != nil {
		h.t.Fatal(err)
	}
}

// A run of a revision's tests is a fact of its release record (rudder.dev/tested-revision and
// rudder.dev/test-result, written with Helm's own record of how each test hook ran): a pass
// that knows nothing else of it — its status lost, no memory of the pass that ran them — runs
// them not again, and reports the run from the record.
func TestPassReadsTheTestRunFromTheRecord(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{chart: "tested", watch: "  test: {enable: true}\n"})
	h.passOnce()
	if got := h.helm.Calls(); !slices.Contains(got, "Test") {
		t.Fatalf("first pass: %q, want the tests run", got)
	}
	rels := h.helm.Stored("ns", "w")
	if l := rels[len(rels)-1].Labels; l[records.LabelTestedRevision] != "1" || l[records.LabelTestResult] != records.TestSucceeded {
		t.Fatalf("the tested revision's record: labels %v", l)
	}
	if records.TestSucceeded != rstatus.TestSucceeded || records.TestFailed != rstatus.TestFailed {
		t.Fatal("the record's test results are not status.release.tested's words")
	}

	cur := h.cr()
	cur.Object["status"] = map[string]any{}
	if err := h.c.Status().Update(context.Background(), cur); err != nil {
		t.Fatal(err)
	}
	h.passOnce()
	if got := h.helm.Calls(); slices.Contains(got, "Test") {
		t.Fatalf("a pass without the status ran the tests again: %q", got)
	}
	if got := h.conds(rstatus.TypeTested); got[0] != "Tested=True/TestSucceeded" {
		t.Fatalf("%v", got)
	}
	tested, _, _ := unstructured.NestedMap(h.cr().Object, "status", "release", "tested")
	if tested["revision"] != int64(1) || tested["result"] != rstatus.TestSucceeded {
		t.Fatalf("status.release.tested = %v", tested)
	}
}
