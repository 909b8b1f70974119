package controllers_test

import (
	"context"
	"fmt"
	"maps"
	"strconv"
	"strings"
	"testing"
	"time"

	"helm.sh/helm/v4/pkg/release/common"
	release "helm.sh/helm/v4/pkg/release/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rudder-operator/rudder/internal/crtest"
	"github.com/rudder-operator/rudder/internal/helm/helmtest"
	"github.com/rudder-operator/rudder/internal/machine"
	"github.com/rudder-operator/rudder/internal/records"
)

const timeout = 60 * time.Second

func TestInstallUpgradeAndHelmCLI(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ns := crtest.NewNamespace(t, k8s, "t-")
	w := crtest.NewCR(widgetGVK, ns, "w1", map[string]any{"message": "first"})
	if err := k8s.Create(ctx, w); err != nil {
		t.Fatal(err)
	}
	u := crtest.WaitCondition(t, k8s, widgetGVK, ns, "w1", "Ready", metav1.ConditionTrue, "ObjectsReady", timeout)
	if rev, _, _ := unstructured.NestedInt64(u.Object, "status", "release", "revision"); rev != 1 {
		t.Fatalf("status.release.revision = %d, want 1", rev)
	}
	var cm corev1.ConfigMap
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "w1"}, &cm); err != nil {
		t.Fatal(err)
	}
	if cm.Data["message"] != "first" || cm.Labels["rudder.dev/managed"] != "true" || len(cm.OwnerReferences) != 1 {
		t.Fatalf("configmap: data %v labels %v owners %v", cm.Data, cm.Labels, cm.OwnerReferences)
	}

	// A spec change makes exactly one new revision.
	crtest.Update(t, k8s, widgetGVK, ns, "w1", func(u *unstructured.Unstructured) {
		u.Object["spec"] = map[string]any{"message": "second"}
	})
	crtest.WaitCondition(t, k8s, widgetGVK, ns, "w1", "Ready", metav1.ConditionTrue, "", timeout)
	h := helmtest.History(t, cluster.Kubeconfig, ns, "w1")
	if len(h) != 2 {
		t.Fatalf("history has %d revisions, want 2", len(h))
	}
	if !strings.Contains(h[1].Info.Description, "rudder upgrade: generation 2, chart widget-0.1.0@") {
		t.Errorf("upgrade description = %q", h[1].Info.Description)
	}

	// Plain helm sees the release and the values the CR asked for.
	out, err := helmCLI(t, "history", "w1", "-n", ns)
	if err != nil || !strings.Contains(out, "superseded") || !strings.Contains(out, "deployed") {
		t.Fatalf("helm history: %v\n%s", err, out)
	}
	out, err = helmCLI(t, "get", "values", "w1", "-n", ns)
	if err != nil || !strings.Contains(out, "message: second") {
		t.Fatalf("helm get values: %v\n%s", err, out)
	}
}

var widgetLabel = map[string]string{"gvk": "Widget.test.rudder.dev/v1"}

func statusWrites(t *testing.T) float64 {
	t.Helper()
	return crtest.Metric(t, "rudder_status_writes_total", widgetLabel)
}

func TestNoOpReconcilesWriteNothing(t *testing.T) {
	ctx := context.Background()
	ns := crtest.NewNamespace(t, k8s, "t-")
	if err := k8s.Create(ctx, crtest.NewCR(widgetGVK, ns, "idle", map[string]any{"message": "x"})); err != nil {
		t.Fatal(err)
	}
	crtest.WaitCondition(t, k8s, widgetGVK, ns, "idle", "Ready", metav1.ConditionTrue, "", timeout)
	// A first forced pass: what the install left behind has settled.
	passes.Passes(t, k8s, widgetGVK, ns, "idle", 1)
	u, err := crtest.Get(ctx, k8s, widgetGVK, ns, "idle")
	if err != nil {
		t.Fatal(err)
	}
	statusRV := statusManagedTime(u.GetManagedFields())
	if statusRV == "" {
		t.Fatal("no status entry in managedFields: the check below would compare nothing")
	}
	before := statusWrites(t)
	// 20 passes, counted, not assumed.
	passes.Passes(t, k8s, widgetGVK, ns, "idle", 20)
	if got := len(helmtest.History(t, cluster.Kubeconfig, ns, "idle")); got != 1 {
		t.Fatalf("revisions after 20 no-op passes = %d, want 1", got)
	}
	if after := statusWrites(t); after != before {
		t.Fatalf("status writes during no-op passes: %v", after-before)
	}
	if u, err = crtest.Get(ctx, k8s, widgetGVK, ns, "idle"); err != nil {
		t.Fatal(err)
	}
	if got := statusManagedTime(u.GetManagedFields()); got != statusRV {
		t.Fatalf("status was written: managedFields time %s → %s", statusRV, got)
	}
}

func statusManagedTime(mf []metav1.ManagedFieldsEntry) string {
	for _, e := range mf {
		if e.Subresource == "status" && e.Time != nil {
			return e.Time.String()
		}
	}
	return ""
}

func TestDriftIsCorrectedWithoutNewRevision(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ns := crtest.NewNamespace(t, k8s, "t-")
	if err := k8s.Create(ctx, crtest.NewCR(widgetGVK, ns, "drift", map[string]any{"message": "keep", "replicas": 2})); err != nil {
		t.Fatal(err)
	}
	crtest.WaitCondition(t, k8s, widgetGVK, ns, "drift", "Ready", metav1.ConditionTrue, "", timeout)

	// Deleted → recreated.
	if err := k8s.Delete(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "drift"}}); err != nil {
		t.Fatal(err)
	}
	crtest.Eventually(t, "configmap recreated", timeout, func(ctx context.Context) (bool, error) {
		var cm corev1.ConfigMap
		err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "drift"}, &cm)
		return err == nil && cm.Data["message"] == "keep", nil
	})
	// Edited → restored.
	var cm corev1.ConfigMap
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "drift"}, &cm); err != nil {
		t.Fatal(err)
	}
	cm.Data["message"] = "tampered"
	cm.Data["extra"] = "someone else's field"
	if err := k8s.Update(ctx, &cm); err != nil {
		t.Fatal(err)
	}
	var dep appsv1.Deployment
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "drift"}, &dep); err != nil {
		t.Fatal(err)
	}
	dep.Spec.Replicas = new(int32(5))
	if err := k8s.Update(ctx, &dep); err != nil {
		t.Fatal(err)
	}
	crtest.Eventually(t, "edits reverted", timeout, func(ctx context.Context) (bool, error) {
		var cm corev1.ConfigMap
		var dep appsv1.Deployment
		if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "drift"}, &cm); err != nil {
			return false, err
		}
		if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "drift"}, &dep); err != nil {
			return false, err
		}
		return cm.Data["message"] == "keep" && *dep.Spec.Replicas == 2, nil
	})
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "drift"}, &cm); err != nil {
		t.Fatal(err)
	}
	if cm.Data["extra"] != "someone else's field" {
		t.Errorf("a field the manifest does not set was removed: %v", cm.Data)
	}
	// A label the manifest sets, changed → restored; someone else's label beside it stays.
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "drift"}, &cm); err != nil {
		t.Fatal(err)
	}
	cm.Labels["app.kubernetes.io/name"] = "tampered"
	cm.Labels["example.com/note"] = "others"
	if err := k8s.Update(ctx, &cm); err != nil {
		t.Fatal(err)
	}
	crtest.Eventually(t, "label restored", timeout, func(ctx context.Context) (bool, error) {
		var cm corev1.ConfigMap
		err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "drift"}, &cm)
		return err == nil && cm.Labels["app.kubernetes.io/name"] == "widget", err
	})
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "drift"}, &cm); err != nil {
		t.Fatal(err)
	}
	if cm.Labels["example.com/note"] != "others" {
		t.Errorf("a label the manifest does not set was removed: %v", cm.Labels)
	}
	if got := len(helmtest.History(t, cluster.Kubeconfig, ns, "drift")); got != 1 {
		t.Fatalf("drift correction made a new revision: %d revisions", got)
	}
}

func TestFailedUpgradeRollsBackAndDoesNotRetry(t *testing.T) {
	ctx := context.Background()
	ns := crtest.NewNamespace(t, k8s, "t-")
	if err := k8s.Create(ctx, crtest.NewCR(widgetGVK, ns, "bad", map[string]any{"message": "ok"})); err != nil {
		t.Fatal(err)
	}
	crtest.WaitCondition(t, k8s, widgetGVK, ns, "bad", "Ready", metav1.ConditionTrue, "", timeout)
	crtest.Update(t, k8s, widgetGVK, ns, "bad", func(u *unstructured.Unstructured) {
		u.Object["spec"] = map[string]any{"message": "ok", "invalidService": true}
	})
	u := crtest.WaitCondition(t, k8s, widgetGVK, ns, "bad", "Stalled", metav1.ConditionTrue, "UpgradeFailed", timeout)
	rel := crtest.Condition(u, "Released")
	if rel.Reason != "RolledBack" || !strings.Contains(rel.Message, "70000") {
		t.Fatalf("Released condition = %+v", rel)
	}
	h := helmtest.History(t, cluster.Kubeconfig, ns, "bad")
	if len(h) != 3 || h[1].Info.Status != common.StatusFailed || h[2].Info.Status != common.StatusDeployed {
		t.Fatalf("history: %s", describe(h))
	}
	// No retry loop: the same broken (chart, values) is not tried again.
	passes.Passes(t, k8s, widgetGVK, ns, "bad", 3)
	if h := helmtest.History(t, cluster.Kubeconfig, ns, "bad"); len(h) != 3 {
		t.Fatalf("passes over a held-back failure changed the history: %s", describe(h))
	}
	// Fixing the spec recovers.
	crtest.Update(t, k8s, widgetGVK, ns, "bad", func(u *unstructured.Unstructured) {
		u.Object["spec"] = map[string]any{"message": "fixed"}
	})
	crtest.WaitCondition(t, k8s, widgetGVK, ns, "bad", "Ready", metav1.ConditionTrue, "", timeout)
	if h := helmtest.History(t, cluster.Kubeconfig, ns, "bad"); len(h) != 4 {
		t.Fatalf("history after fix: %s", describe(h))
	}
}

// A failed install's objects are removed and its revision is kept, failed, as the failure's
// record; the same (chart, values) is not retried; fixing the spec installs over it (Helm's
// replace): the history shows the failure, then the install.
func TestFailedInstallIsRemoved(t *testing.T) {
	ctx := context.Background()
	ns := crtest.NewNamespace(t, k8s, "t-")
	if err := k8s.Create(ctx, crtest.NewCR(widgetGVK, ns, "badinstall", map[string]any{"message": "ok", "invalidService": true})); err != nil {
		t.Fatal(err)
	}
	u := crtest.WaitCondition(t, k8s, widgetGVK, ns, "badinstall", "Stalled", metav1.ConditionTrue, "InstallFailed", timeout)
	if msg := crtest.Condition(u, "Released").Message; !strings.Contains(msg, "70000") {
		t.Fatalf("Released message: %s", msg)
	}
	passes.Passes(t, k8s, widgetGVK, ns, "badinstall", 3)
	err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "badinstall"}, &corev1.ConfigMap{})
	if h := helmtest.History(t, cluster.Kubeconfig, ns, "badinstall"); len(h) != 1 || h[0].Info.Status != common.StatusFailed ||
		!strings.Contains(h[0].Info.Description, "70000") || !apierrors.IsNotFound(err) {
		t.Fatalf("passes over a failed install left history %s, configmap: %v", describe(h), err)
	}
	crtest.Update(t, k8s, widgetGVK, ns, "badinstall", func(u *unstructured.Unstructured) {
		u.Object["spec"] = map[string]any{"message": "fixed"}
	})
	crtest.WaitCondition(t, k8s, widgetGVK, ns, "badinstall", "Ready", metav1.ConditionTrue, "", timeout)
	if h := helmtest.History(t, cluster.Kubeconfig, ns, "badinstall"); len(h) != 2 || h[0].Info.Status != common.StatusFailed ||
		h[1].Info.Status != common.StatusDeployed {
		t.Fatalf("history after fix: %s", describe(h))
	}
}

func describe(h []*release.Release) string {
	var b strings.Builder
	for _, r := range h {
		fmt.Fprintf(&b, "\n  %d %s %s", r.Version, r.Info.Status, r.Info.Description)
	}
	return b.String()
}

func TestPendingUpgradeIsUnlocked(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ns := crtest.NewNamespace(t, k8s, "t-")
	if err := k8s.Create(ctx, crtest.NewCR(widgetGVK, ns, "locked", map[string]any{"message": "a"})); err != nil {
		t.Fatal(err)
	}
	crtest.WaitCondition(t, k8s, widgetGVK, ns, "locked", "Ready", metav1.ConditionTrue, "", timeout)
	// Simulate an operator killed mid-upgrade: pause, leave a pending-upgrade revision, resume.
	crtest.Update(t, k8s, widgetGVK, ns, "locked", func(u *unstructured.Unstructured) {
		u.SetAnnotations(map[string]string{machine.AnnotationPaused: "true"})
	})
	crtest.WaitCondition(t, k8s, widgetGVK, ns, "locked", "Paused", metav1.ConditionTrue, "", timeout)
	cfg := helmtest.Config(t, cluster.Kubeconfig, ns)
	last, err := records.V1Of(cfg.Releases.Last("locked"))
	if err != nil {
		t.Fatal(err)
	}
	pending := *last
	info := *last.Info
	pending.Info = &info
	pending.Version++
	pending.Info.Status = common.StatusPendingUpgrade
	pending.Info.Description = "killed mid-upgrade"
	// As rudder's own upgrade stores it (see records.LabelRevision).
	pending.Labels = maps.Clone(last.Labels)
	pending.Labels[records.LabelRevision] = strconv.Itoa(pending.Version)
	if err := cfg.Releases.Create(&pending); err != nil {
		t.Fatal(err)
	}
	crtest.Update(t, k8s, widgetGVK, ns, "locked", func(u *unstructured.Unstructured) {
		u.SetAnnotations(nil)
		u.Object["spec"] = map[string]any{"message": "b"}
	})
	crtest.WaitCondition(t, k8s, widgetGVK, ns, "locked", "Ready", metav1.ConditionTrue, "", timeout)
	h := helmtest.History(t, cluster.Kubeconfig, ns, "locked")
	if len(h) != 3 || h[1].Info.Status != common.StatusFailed || !strings.Contains(h[1].Info.Description, "unlocked by rudder") ||
		h[2].Info.Status != common.StatusDeployed {
		t.Fatalf("history: %s", describe(h))
	}
}

// TestLostSupersedeIsRepaired: an upgrade whose update of the revision it replaced was lost
// (Helm logs that and goes on) leaves two deployed revisions; the CR's next pass marks the older
// one superseded, with no new revision.
func TestLostSupersedeIsRepaired(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ns := crtest.NewNamespace(t, k8s, "t-")
	if err := k8s.Create(ctx, crtest.NewCR(widgetGVK, ns, "twice", map[string]any{"message": "a"})); err != nil {
		t.Fatal(err)
	}
	crtest.WaitCondition(t, k8s, widgetGVK, ns, "twice", "Ready", metav1.ConditionTrue, "", timeout)
	crtest.Update(t, k8s, widgetGVK, ns, "twice", func(u *unstructured.Unstructured) {
		u.Object["spec"] = map[string]any{"message": "b"}
	})
	crtest.Eventually(t, "revision 2 deployed", timeout, func(context.Context) (bool, error) {
		h := helmtest.History(t, cluster.Kubeconfig, ns, "twice")
		return len(h) == 2 && h[1].Info.Status == common.StatusDeployed, nil
	})
	// The record of revision 1 as the lost update left it.
	setRecordStatus(t, ns, "twice", 1, common.StatusDeployed)
	// A lost update changes no record, so nothing wakes the CR: its next pass (here, after an
	// annotation change) finds the history in the cache.
	crtest.Update(t, k8s, widgetGVK, ns, "twice", func(u *unstructured.Unstructured) {
		u.SetAnnotations(map[string]string{"test.rudder.dev/poke": "1"})
	})
	crtest.WaitEvent(t, k8s, ns, "twice", "Superseded", "revisions [1] were still marked deployed next to revision 2")
	h := helmtest.History(t, cluster.Kubeconfig, ns, "twice")
	if len(h) != 2 || h[0].Info.Status != common.StatusSuperseded || h[1].Info.Status != common.StatusDeployed {
		t.Fatalf("history: %s", describe(h))
	}
}

// setRecordStatus rewrites the status in the stored record of a release's revision, as an
// action that died or lost a write leaves it.
func setRecordStatus(t *testing.T, ns, name string, version int, st common.Status) {
	t.Helper()
	cfg := helmtest.Config(t, cluster.Kubeconfig, ns)
	rel, err := records.V1Of(cfg.Releases.Get(name, version))
	if err != nil {
		t.Fatal(err)
	}
	rel.Info.Status = st
	if err := cfg.Releases.Update(rel); err != nil {
		t.Fatal(err)
	}
}

func TestReleaseNameConflictBetweenKinds(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ns := crtest.NewNamespace(t, k8s, "t-")
	if err := k8s.Create(ctx, crtest.NewCR(widgetGVK, ns, "same", map[string]any{"message": "widget"})); err != nil {
		t.Fatal(err)
	}
	crtest.WaitCondition(t, k8s, widgetGVK, ns, "same", "Ready", metav1.ConditionTrue, "", timeout)
	if err := k8s.Create(ctx, crtest.NewCR(gadgetGVK, ns, "same", map[string]any{"message": "gadget"})); err != nil {
		t.Fatal(err)
	}
	u := crtest.WaitCondition(t, k8s, gadgetGVK, ns, "same", "Stalled", metav1.ConditionTrue, "ReleaseNameConflict", timeout)
	if msg := crtest.Condition(u, "Stalled").Message; !strings.Contains(msg, "Widget.test.rudder.dev") {
		t.Errorf("conflict message does not name the owner: %s", msg)
	}
	var cm corev1.ConfigMap
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "same"}, &cm); err != nil || cm.Data["message"] != "widget" {
		t.Fatalf("the Widget's operand was touched: %v %v", err, cm.Data)
	}
	// Deleting the Gadget must not uninstall the Widget's release.
	g := crtest.MustGet(t, k8s, gadgetGVK, ns, "same")
	if err := k8s.Delete(ctx, g); err != nil {
		t.Fatal(err)
	}
	crtest.Eventually(t, "gadget gone", timeout, func(ctx context.Context) (bool, error) {
		_, err := crtest.Get(ctx, k8s, gadgetGVK, ns, "same")
		return apierrors.IsNotFound(err), nil
	})
	if h := helmtest.History(t, cluster.Kubeconfig, ns, "same"); len(h) != 1 || h[0].Info.Status != common.StatusDeployed {
		t.Fatalf("widget release changed: %s", describe(h))
	}
}

func TestObjectsOutsideTheNamespaceAreRefused(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ns := crtest.NewNamespace(t, k8s, "t-")
	other := crtest.NewNamespace(t, k8s, "t-")
	if err := k8s.Create(ctx, crtest.NewCR(widgetGVK, ns, "escape", map[string]any{"otherNamespace": other})); err != nil {
		t.Fatal(err)
	}
	u := crtest.WaitCondition(t, k8s, widgetGVK, ns, "escape", "Stalled", metav1.ConditionTrue, "ChartInvalid", timeout)
	if msg := crtest.Condition(u, "Stalled").Message; !strings.Contains(msg, other) || !strings.Contains(msg, `ConfigMap "escape"`) {
		t.Errorf("message does not name the object: %s", msg)
	}
	var list corev1.ConfigMapList
	if err := k8s.List(ctx, &list, client.InNamespace(other), client.MatchingLabels{"rudder.dev/managed": "true"}); err != nil || len(list.Items) != 0 {
		t.Fatalf("objects were created in %s: %v %d", other, err, len(list.Items))
	}
	var dep appsv1.Deployment
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "escape"}, &dep); !apierrors.IsNotFound(err) {
		t.Fatalf("nothing may be applied, but the Deployment exists (err=%v)", err)
	}
}

func TestPauseAndResume(t *testing.T) {
	ctx := context.Background()
	ns := crtest.NewNamespace(t, k8s, "t-")
	if err := k8s.Create(ctx, crtest.NewCR(widgetGVK, ns, "p", map[string]any{"message": "1"})); err != nil {
		t.Fatal(err)
	}
	crtest.WaitCondition(t, k8s, widgetGVK, ns, "p", "Ready", metav1.ConditionTrue, "", timeout)
	crtest.Update(t, k8s, widgetGVK, ns, "p", func(u *unstructured.Unstructured) {
		u.SetAnnotations(map[string]string{machine.AnnotationPaused: "true"})
		u.Object["spec"] = map[string]any{"message": "2"}
	})
	crtest.WaitCondition(t, k8s, widgetGVK, ns, "p", "Paused", metav1.ConditionTrue, "Paused", timeout)
	passes.Passes(t, k8s, widgetGVK, ns, "p", 3)
	if h := helmtest.History(t, cluster.Kubeconfig, ns, "p"); len(h) != 1 {
		t.Fatalf("passes over a paused CR changed the release: %s", describe(h))
	}
	crtest.Update(t, k8s, widgetGVK, ns, "p", func(u *unstructured.Unstructured) {
		u.SetAnnotations(nil)
	})
	crtest.WaitCondition(t, k8s, widgetGVK, ns, "p", "Paused", metav1.ConditionFalse, "Resumed", timeout)
	crtest.WaitCondition(t, k8s, widgetGVK, ns, "p", "Ready", metav1.ConditionTrue, "", timeout)
	if h := helmtest.History(t, cluster.Kubeconfig, ns, "p"); len(h) != 2 {
		t.Fatalf("history after resume: %s", describe(h))
	}
}

func TestDeletionRemovesEverything(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ns := crtest.NewNamespace(t, k8s, "t-")
	if err := k8s.Create(ctx, crtest.NewCR(widgetGVK, ns, "gone", map[string]any{})); err != nil {
		t.Fatal(err)
	}
	u := crtest.WaitCondition(t, k8s, widgetGVK, ns, "gone", "Ready", metav1.ConditionTrue, "", timeout)
	if err := k8s.Delete(ctx, u); err != nil {
		t.Fatal(err)
	}
	crtest.Eventually(t, "CR, release and operands gone", timeout, func(ctx context.Context) (bool, error) {
		_, err := crtest.Get(ctx, k8s, widgetGVK, ns, "gone")
		if !apierrors.IsNotFound(err) {
			return false, nil
		}
		var cm corev1.ConfigMap
		if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "gone"}, &cm); !apierrors.IsNotFound(err) {
			return false, nil
		}
		var dep appsv1.Deployment
		if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "gone"}, &dep); !apierrors.IsNotFound(err) {
			return false, nil
		}
		return len(helmtest.History(t, cluster.Kubeconfig, ns, "gone")) == 0, nil
	})
	// The uninstall is an action like any other: chosen by plan.Next, run through do, with
	// its Event (the pass's own recorder) and its count.
	crtest.WaitEvent(t, k8s, ns, "gone", "Uninstalled", "release gone uninstalled")
	if n := crtest.Metric(t, "rudder_release_actions_total", map[string]string{"gvk": "Widget.test.rudder.dev/v1", "action": "uninstall", "result": "ok"}); n < 1 {
		t.Errorf("rudder_release_actions_total{action=uninstall,result=ok} = %v after an uninstall", n)
	}
}

func TestValuesViolatingTheSchemaStall(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ns := crtest.NewNamespace(t, k8s, "t-")
	if err := k8s.Create(ctx, crtest.NewCR(widgetGVK, ns, "schema", map[string]any{"replicas": -1})); err != nil {
		t.Fatal(err)
	}
	u := crtest.WaitCondition(t, k8s, widgetGVK, ns, "schema", "Stalled", metav1.ConditionTrue, "ValuesInvalid", timeout)
	if msg := crtest.Condition(u, "Stalled").Message; !strings.Contains(msg, "replicas") {
		t.Errorf("message does not name the field: %s", msg)
	}
	if len(helmtest.History(t, cluster.Kubeconfig, ns, "schema")) != 0 {
		t.Fatal("a release was made from invalid values")
	}
}

// TestDeadUninstallIsFinished: a release left "uninstalling" by an uninstall that died (the
// clean-up of a failed install, SIGKILLed; found by the fault suite) is uninstalled, then
// installed again: Helm refuses to install over it, which used to fail every retry.
func TestDeadUninstallIsFinished(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ns := crtest.NewNamespace(t, k8s, "t-")
	if err := k8s.Create(ctx, crtest.NewCR(widgetGVK, ns, "halfgone", map[string]any{"message": "a"})); err != nil {
		t.Fatal(err)
	}
	crtest.WaitCondition(t, k8s, widgetGVK, ns, "halfgone", "Ready", metav1.ConditionTrue, "", timeout)
	crtest.Update(t, k8s, widgetGVK, ns, "halfgone", func(u *unstructured.Unstructured) {
		u.SetAnnotations(map[string]string{machine.AnnotationPaused: "true"})
	})
	crtest.WaitCondition(t, k8s, widgetGVK, ns, "halfgone", "Paused", metav1.ConditionTrue, "", timeout)
	setRecordStatus(t, ns, "halfgone", 1, common.StatusUninstalling)
	crtest.Update(t, k8s, widgetGVK, ns, "halfgone", func(u *unstructured.Unstructured) {
		u.SetAnnotations(nil)
		u.Object["spec"] = map[string]any{"message": "b"}
	})
	crtest.WaitCondition(t, k8s, widgetGVK, ns, "halfgone", "Ready", metav1.ConditionTrue, "", timeout)
	h := helmtest.History(t, cluster.Kubeconfig, ns, "halfgone")
	if len(h) != 1 || h[0].Info.Status != common.StatusDeployed || h[0].Config["message"] != "b" {
		t.Fatalf("history: %s", describe(h))
	}
}
