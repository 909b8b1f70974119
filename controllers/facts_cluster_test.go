package controllers_test

import (
	"context"
	"strconv"
	"strings"
	"testing"

	"helm.sh/helm/v4/pkg/release/common"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	rstatus "github.com/rudder-operator/rudder/api/status"
	"github.com/rudder-operator/rudder/internal/crtest"
	"github.com/rudder-operator/rudder/internal/helm"
	"github.com/rudder-operator/rudder/internal/helm/helmtest"
	"github.com/rudder-operator/rudder/internal/machine"
	"github.com/rudder-operator/rudder/internal/records"
)

// The release's facts are labels of its newest record: an upgrade that failed is held back,
// and a rollback-to value handled, on the release Secret itself. A CR whose status is written
// over with nothing is decided as before — no new revision, the failure still held back with
// its count, the rollback not made again — and its status is reported again from the record.
func TestFactsOutliveTheStatus(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ns := crtest.NewNamespace(t, k8s, "t-")
	if err := k8s.Create(ctx, crtest.NewCR(widgetGVK, ns, "lost", map[string]any{"message": "one"})); err != nil {
		t.Fatal(err)
	}
	crtest.WaitCondition(t, k8s, widgetGVK, ns, "lost", "Ready", metav1.ConditionTrue, "", timeout)
	crtest.Update(t, k8s, widgetGVK, ns, "lost", func(u *unstructured.Unstructured) {
		u.Object["spec"] = map[string]any{"message": "two"}
	})
	crtest.WaitCondition(t, k8s, widgetGVK, ns, "lost", "Ready", metav1.ConditionTrue, "", timeout)
	crtest.Update(t, k8s, widgetGVK, ns, "lost", func(u *unstructured.Unstructured) {
		u.SetAnnotations(map[string]string{machine.AnnotationRollbackTo: "1"})
	})
	crtest.WaitCondition(t, k8s, widgetGVK, ns, "lost", rstatus.TypeRollbackRequest, metav1.ConditionTrue, "", timeout)
	crtest.Update(t, k8s, widgetGVK, ns, "lost", func(u *unstructured.Unstructured) {
		u.Object["spec"] = map[string]any{"message": "three", "invalidService": true}
	})
	crtest.WaitCondition(t, k8s, widgetGVK, ns, "lost", "Stalled", metav1.ConditionTrue, rstatus.ReasonUpgradeFailed, timeout)
	hist := helmtest.History(t, cluster.Kubeconfig, ns, "lost")
	newest := hist[len(hist)-1]
	var sec corev1.Secret
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: records.RecordPrefix + "lost.v" + strconv.Itoa(newest.Version)}, &sec); err != nil {
		t.Fatal(err)
	}
	f := records.FactsOf(sec.Labels)
	if f == nil || f.Of != newest.Version || f.Failed == nil || f.Failed.Cause != rstatus.ReasonUpgradeFailed || f.Failed.Count != 1 ||
		f.RollbackTo != records.HandledValue("1") || f.Applied == nil {
		t.Fatalf("revision %d's record carries the facts %+v (labels %v)", newest.Version, f, sec.Labels)
	}

	cr := crtest.MustGet(t, k8s, widgetGVK, ns, "lost")
	before, _, _ := unstructured.NestedMap(cr.Object, "status", "release", "failed")
	cr.Object["status"] = map[string]any{}
	if err := k8s.Status().Update(ctx, cr); err != nil {
		t.Fatal(err)
	}
	passes.Passes(t, k8s, widgetGVK, ns, "lost", 2)
	if h := helmtest.History(t, cluster.Kubeconfig, ns, "lost"); len(h) != len(hist) {
		t.Fatalf("passes over a CR whose status was lost changed the history: %s", describe(h))
	}
	u := crtest.MustGet(t, k8s, widgetGVK, ns, "lost")
	if c := crtest.Condition(u, rstatus.TypeStalled); c == nil || c.Status != metav1.ConditionTrue || c.Reason != rstatus.ReasonUpgradeFailed {
		t.Fatalf("Stalled after the status was lost: %+v", c)
	}
	after, _, _ := unstructured.NestedMap(u.Object, "status", "release", "failed")
	for _, k := range []string{"chartDigest", "valuesDigest", "reason", "failures", "lastFailure"} {
		if after[k] != before[k] {
			t.Errorf("status.release.failed.%s reported again as %v, was %v", k, after[k], before[k])
		}
	}
	if v, _, _ := unstructured.NestedString(u.Object, "status", "release", "rollbackRequest"); v != "1" {
		t.Errorf("status.release.rollbackRequest reported again as %q", v)
	}
}

// A failed install's record is kept — its objects removed, the record failed and marked
// records.LabelObjectsRemoved, carrying the failure as its facts — and holds its (chart,
// values) back as the record says, with the CR's status lost: no install, no removal. The
// fixed spec is installed over it as the revision after it (Helm's replace), which leaves the
// failed record as it was: the history shows the failure, then the install.
func TestKeptFailedInstallIsInstalledOver(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ns := crtest.NewNamespace(t, k8s, "t-")
	description := failedInstallKept(t, ns, "kept")
	if !strings.Contains(description, "70000") {
		t.Fatalf("the kept record's description %q is not Helm's failure", description)
	}
	cr := crtest.MustGet(t, k8s, widgetGVK, ns, "kept")
	cr.Object["status"] = map[string]any{}
	if err := k8s.Status().Update(ctx, cr); err != nil {
		t.Fatal(err)
	}
	passes.Passes(t, k8s, widgetGVK, ns, "kept", 2)
	if h := helmtest.History(t, cluster.Kubeconfig, ns, "kept"); len(h) != 1 || h[0].Info.Status != common.StatusFailed || h[0].Info.Description != description {
		t.Fatalf("passes over a kept failed install changed the history: %s", describe(h))
	}
	u := crtest.MustGet(t, k8s, widgetGVK, ns, "kept")
	if c := crtest.Condition(u, rstatus.TypeStalled); c == nil || c.Status != metav1.ConditionTrue || c.Reason != rstatus.ReasonInstallFailed {
		t.Fatalf("Stalled with the failure kept in the record: %+v", c)
	}

	crtest.Update(t, k8s, widgetGVK, ns, "kept", func(u *unstructured.Unstructured) {
		u.Object["spec"] = map[string]any{"message": "fixed"}
	})
	u = crtest.WaitCondition(t, k8s, widgetGVK, ns, "kept", rstatus.TypeReady, metav1.ConditionTrue, "", timeout)
	if c := crtest.Condition(u, rstatus.TypeReleased); c == nil || c.Reason != rstatus.ReasonInstallSucceeded {
		t.Errorf("Released after the install over the kept record: %+v", c)
	}
	h := helmtest.History(t, cluster.Kubeconfig, ns, "kept")
	if len(h) != 2 || h[0].Info.Status != common.StatusFailed || h[0].Info.Description != description ||
		h[1].Info.Status != common.StatusDeployed || h[1].Labels[records.LabelAction] != string(records.ActionInstall) {
		t.Fatalf("history after the fix: %s", describe(h))
	}
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "kept"}, &corev1.ConfigMap{}); err != nil {
		t.Fatalf("the install over the kept record: %v", err)
	}
	// Both Helm CLIs read the history as rudder left it.
	for _, cli := range []string{"helm", "helm3"} {
		out, err := cluster.Command(cli, "history", "kept", "-n", ns).CombinedOutput()
		if err != nil || !strings.Contains(string(out), "failed") || !strings.Contains(string(out), "70000") ||
			!strings.Contains(string(out), "deployed") || !strings.Contains(string(out), "rudder install: generation 2") {
			t.Errorf("%s history: %v\n%s", cli, err, out)
		}
	}
}

// A process killed between the two writes that keep a failed install (Helm's uninstall,
// keeping the history, then the mark) leaves the revision uninstalled, its failure among its
// facts: the next pass finishes keeping it — failed again, marked kept, the failure still held
// back — instead of purging it as an uninstall that died.
func TestAKeepThatDiedIsFinished(t *testing.T) {
	t.Parallel()
	ns := crtest.NewNamespace(t, k8s, "t-")
	failedInstallKept(t, ns, "halfkept")
	cfg := helmtest.Config(t, cluster.Kubeconfig, ns)
	rel, err := records.V1Of(cfg.Releases.Last("halfkept"))
	if err != nil {
		t.Fatal(err)
	}
	description := rel.Info.Description
	delete(rel.Labels, records.LabelObjectsRemoved)
	rel.SetStatus(common.StatusUninstalled, description) // Helm's uninstall, given the failure's description
	if err := cfg.Releases.Update(rel); err != nil {
		t.Fatal(err)
	}
	crtest.Update(t, k8s, widgetGVK, ns, "halfkept", func(u *unstructured.Unstructured) {
		u.SetAnnotations(map[string]string{"touched": "1"}) // a pass, the spec unchanged
	})
	crtest.Eventually(t, "the keep finished", timeout, func(context.Context) (bool, error) {
		h := helmtest.History(t, cluster.Kubeconfig, ns, "halfkept")
		return len(h) == 1 && records.HeadOf(helm.View(h[0])).Kept(), nil
	})
	h := helmtest.History(t, cluster.Kubeconfig, ns, "halfkept")
	if h[0].Version != 1 || h[0].Info.Description != description {
		t.Fatalf("the finished keep: %s", describe(h))
	}
	u := crtest.MustGet(t, k8s, widgetGVK, ns, "halfkept")
	if c := crtest.Condition(u, rstatus.TypeStalled); c == nil || c.Status != metav1.ConditionTrue || c.Reason != rstatus.ReasonInstallFailed {
		t.Fatalf("Stalled after the keep was finished: %+v", c)
	}
}

// failedInstallKept creates Widget name in ns with a Service the API server refuses, waits
// until its install failed and its record is kept, and returns that record's description.
func failedInstallKept(t *testing.T, ns, name string) string {
	t.Helper()
	if err := k8s.Create(context.Background(), crtest.NewCR(widgetGVK, ns, name, map[string]any{"message": "ok", "invalidService": true})); err != nil {
		t.Fatal(err)
	}
	crtest.WaitCondition(t, k8s, widgetGVK, ns, name, rstatus.TypeStalled, metav1.ConditionTrue, rstatus.ReasonInstallFailed, timeout)
	var description string
	crtest.Eventually(t, "the failed install's record kept", timeout, func(context.Context) (bool, error) {
		h := helmtest.History(t, cluster.Kubeconfig, ns, name)
		if len(h) != 1 || !records.HeadOf(helm.View(h[0])).Kept() {
			return false, nil
		}
		description = h[0].Info.Description
		return true, nil
	})
	return description
}
