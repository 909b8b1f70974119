package controllers_test

import (
	"context"
	"fmt"
	"maps"
	"strings"
	"testing"
	"time"

	"helm.sh/helm/v4/pkg/release/common"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rudder-operator/rudder/internal/crtest"
	"github.com/rudder-operator/rudder/internal/helm/helmtest"
	"github.com/rudder-operator/rudder/internal/machine"
	"github.com/rudder-operator/rudder/internal/records"
)

// widgetAt creates a Widget and upgrades it once: revision 1 says "one", revision 2 "two".
func widgetAt(t *testing.T, ns, name string) {
	t.Helper()
	ctx := context.Background()
	if err := k8s.Create(ctx, crtest.NewCR(widgetGVK, ns, name, map[string]any{"message": "one"})); err != nil {
		t.Fatal(err)
	}
	crtest.WaitCondition(t, k8s, widgetGVK, ns, name, "Ready", metav1.ConditionTrue, "", timeout)
	setSpec(t, ns, name, "two")
	waitRevision(t, ns, name, 2, 0)
}

// updateCR reads a CR, changes it and writes it back, again on a conflict (rudder writes the
// CR's status and finalizer meanwhile).
func setSpec(t *testing.T, ns, name, message string) {
	t.Helper()
	crtest.Update(t, k8s, widgetGVK, ns, name, func(u *unstructured.Unstructured) { u.Object["spec"] = map[string]any{"message": message} })
}

func annotate(t *testing.T, ns, name, key, value string) {
	t.Helper()
	crtest.Update(t, k8s, widgetGVK, ns, name, func(u *unstructured.Unstructured) {
		a := u.GetAnnotations()
		if a == nil {
			a = map[string]string{}
		}
		a[key] = value
		u.SetAnnotations(a)
	})
}

// waitRevision waits until the CR is Ready on revision rev, rolled back to rolledBackTo (0:
// not a rollback), and returns it.
func waitRevision(t *testing.T, ns, name string, rev, rolledBackTo int64) *unstructured.Unstructured {
	t.Helper()
	return waitRevisionOf(t, widgetGVK, ns, name, rev, rolledBackTo)
}

// waitRevisionOf is waitRevision for a CR of kind gvk.
func waitRevisionOf(t *testing.T, gvk schema.GroupVersionKind, ns, name string, rev, rolledBackTo int64) *unstructured.Unstructured {
	t.Helper()
	var last *unstructured.Unstructured
	crtest.Eventually(t, fmt.Sprintf("%s/%s Ready on revision %d (rolled back to %d)", ns, name, rev, rolledBackTo), timeout, func(ctx context.Context) (bool, error) {
		u, err := crtest.Get(ctx, k8s, gvk, ns, name)
		if err != nil {
			return false, err
		}
		last = u
		r, _, _ := unstructured.NestedInt64(u.Object, "status", "release", "revision")
		to, _, _ := unstructured.NestedInt64(u.Object, "status", "release", "rolledBackTo")
		c := crtest.Condition(u, "Ready")
		if r != rev || to != rolledBackTo || c == nil || c.Status != metav1.ConditionTrue {
			return false, fmt.Errorf("revision %d, rolled back to %d, Ready %+v", r, to, c)
		}
		return true, nil
	})
	return last
}

func configMapMessage(t *testing.T, ns, name string) string {
	t.Helper()
	var cm corev1.ConfigMap
	if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, &cm); err != nil {
		t.Fatal(err)
	}
	return cm.Data["message"]
}

// TestManualRollbackSticks: `helm rollback` is kept — no revert, no new revision, drift restored
// from the rolled-back revision — until the spec changes, which upgrades from it as usual.
func TestManualRollbackSticks(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ns := crtest.NewNamespace(t, k8s, "t-")
	widgetAt(t, ns, "rb")

	if out, err := helmCLI(t, "rollback", "rb", "1", "-n", ns); err != nil {
		t.Fatalf("helm rollback: %v\n%s", err, out)
	}
	u := waitRevision(t, ns, "rb", 3, 1)
	rel := crtest.Condition(u, "Released")
	if rel.Status != metav1.ConditionTrue || rel.Reason != "ManualRollback" ||
		!strings.Contains(rel.Message, "revision 3 is a rollback to revision 1") || !strings.Contains(rel.Message, "until the spec or the chart changes") {
		t.Fatalf("Released: %+v", rel)
	}
	crtest.WaitEvent(t, k8s, ns, "rb", "ManualRollback", "revision 3 is a rollback to revision 1")
	if got := configMapMessage(t, ns, "rb"); got != "one" {
		t.Fatalf("ConfigMap says %q after the rollback, want one", got)
	}

	// Drift is corrected to the rolled-back revision, not to the spec: a pass ran, and kept it.
	if err := k8s.Delete(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "rb"}}); err != nil {
		t.Fatal(err)
	}
	crtest.Eventually(t, "the ConfigMap restored from revision 3", timeout, func(ctx context.Context) (bool, error) {
		var cm corev1.ConfigMap
		if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "rb"}, &cm); err != nil {
			return false, client.IgnoreNotFound(err)
		}
		if cm.Data["message"] != "one" {
			return false, fmt.Errorf("restored with %q", cm.Data["message"])
		}
		return true, nil
	})
	if h := helmtest.History(t, cluster.Kubeconfig, ns, "rb"); len(h) != 3 || h[2].Info.Status != common.StatusDeployed || h[2].Info.Description != "Rollback to 1" {
		t.Fatalf("the rollback was not kept as it is: %s", describe(h))
	}

	// The next change upgrades from the head, history intact.
	setSpec(t, ns, "rb", "three")
	u = waitRevision(t, ns, "rb", 4, 0)
	if c := crtest.Condition(u, "Released"); c.Reason != "UpgradeSucceeded" && c.Reason != "UpToDate" {
		t.Fatalf("Released after the spec change: %+v", c)
	}
	h := helmtest.History(t, cluster.Kubeconfig, ns, "rb")
	if len(h) != 4 || h[2].Info.Description != "Rollback to 1" || h[3].Info.Status != common.StatusDeployed {
		t.Fatalf("history: %s", describe(h))
	}
	if got := configMapMessage(t, ns, "rb"); got != "three" {
		t.Fatalf("ConfigMap says %q, want three", got)
	}
}

// TestRollbackByAnnotation: rudder.dev/rollback-to rolls back once per value, naming the
// request; a revision the history lacks is refused with a condition and an Event.
func TestRollbackByAnnotation(t *testing.T) {
	t.Parallel()
	ns := crtest.NewNamespace(t, k8s, "t-")
	widgetAt(t, ns, "ann")

	annotate(t, ns, "ann", machine.AnnotationRollbackTo, "1")
	crtest.WaitCondition(t, k8s, widgetGVK, ns, "ann", "RollbackRequest", metav1.ConditionTrue, "RolledBack", timeout)
	u := waitRevision(t, ns, "ann", 3, 1)
	if c := crtest.Condition(u, "Released"); c.Reason != "ManualRollback" {
		t.Fatalf("Released: %+v", c)
	}
	if v, _, _ := unstructured.NestedString(u.Object, "status", "release", "rollbackRequest"); v != "1" {
		t.Fatalf("status.release.rollbackRequest = %q", v)
	}
	crtest.WaitEvent(t, k8s, ns, "ann", "RolledBack", "rolled back to revision 1", machine.AnnotationRollbackTo)
	h := helmtest.History(t, cluster.Kubeconfig, ns, "ann")
	if len(h) != 3 || !strings.Contains(h[2].Info.Description, `requested by rudder.dev/rollback-to="1"`) {
		t.Fatalf("history: %s", describe(h))
	}
	if got := configMapMessage(t, ns, "ann"); got != "one" {
		t.Fatalf("ConfigMap says %q after the rollback, want one", got)
	}

	annotate(t, ns, "ann", machine.AnnotationRollbackTo, "99")
	u = crtest.WaitCondition(t, k8s, widgetGVK, ns, "ann", "RollbackRequest", metav1.ConditionFalse, "RollbackRejected", timeout)
	if msg := crtest.Condition(u, "RollbackRequest").Message; !strings.Contains(msg, `"99"`) || !strings.Contains(msg, "nothing was done") {
		t.Fatalf("RollbackRequest: %s", msg)
	}
	crtest.WaitEvent(t, k8s, ns, "ann", "RollbackRejected", `"99"`)
	if h := helmtest.History(t, cluster.Kubeconfig, ns, "ann"); len(h) != 3 {
		t.Fatalf("a refused request changed the history: %s", describe(h))
	}

	// The handled value stays as a record: a spec change upgrades, and rolls nothing back.
	setSpec(t, ns, "ann", "three")
	waitRevision(t, ns, "ann", 4, 0)
	if h := helmtest.History(t, cluster.Kubeconfig, ns, "ann"); len(h) != 4 || h[3].Info.Status != common.StatusDeployed || strings.Contains(h[3].Info.Description, "rollback") {
		t.Fatalf("history: %s", describe(h))
	}
	// A new value acts again.
	annotate(t, ns, "ann", machine.AnnotationRollbackTo, "2")
	waitRevision(t, ns, "ann", 5, 2)
	if got := configMapMessage(t, ns, "ann"); got != "two" {
		t.Fatalf("ConfigMap says %q, want two", got)
	}
}

// TestForeignPendingRevisionIsLeftToItsOperation: a pending revision rudder did not start (a
// person's helm rollback, still running) is not unlocked while it may be live; one older than
// Helm's default timeout is.
func TestForeignPendingRevisionIsLeftToItsOperation(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ns := crtest.NewNamespace(t, k8s, "t-")
	if err := k8s.Create(ctx, crtest.NewCR(widgetGVK, ns, "busy", map[string]any{"message": "a"})); err != nil {
		t.Fatal(err)
	}
	crtest.WaitCondition(t, k8s, widgetGVK, ns, "busy", "Ready", metav1.ConditionTrue, "", timeout)
	annotate(t, ns, "busy", machine.AnnotationPaused, "true")
	crtest.WaitCondition(t, k8s, widgetGVK, ns, "busy", "Paused", metav1.ConditionTrue, "", timeout)

	// What `helm rollback` stores first: a copy of the target's labels, pending-rollback.
	cfg := helmtest.Config(t, cluster.Kubeconfig, ns)
	last, err := records.V1Of(cfg.Releases.Last("busy"))
	if err != nil {
		t.Fatal(err)
	}
	pending := *last
	info := *last.Info
	pending.Info, pending.Version, pending.Labels = &info, last.Version+1, maps.Clone(last.Labels)
	pending.Info.Status, pending.Info.Description, pending.Info.LastDeployed = common.StatusPendingRollback, "Rollback to 1", time.Now()
	if err := cfg.Releases.Create(&pending); err != nil {
		t.Fatal(err)
	}
	crtest.Update(t, k8s, widgetGVK, ns, "busy", func(u *unstructured.Unstructured) {
		u.SetAnnotations(nil)
		u.Object["spec"] = map[string]any{"message": "b"}
	})
	u := crtest.WaitCondition(t, k8s, widgetGVK, ns, "busy", "Released", metav1.ConditionFalse, "PendingOperation", timeout)
	if msg := crtest.Condition(u, "Released").Message; !strings.Contains(msg, "revision 2 is pending-rollback by an operation rudder did not start") {
		t.Fatalf("Released: %s", msg)
	}
	if h := helmtest.History(t, cluster.Kubeconfig, ns, "busy"); len(h) != 2 || h[1].Info.Status != common.StatusPendingRollback {
		t.Fatalf("the live operation's revision was touched: %s", describe(h))
	}

	// The same revision, started longer ago than Helm's default timeout: dead, unlocked.
	pending.Info.LastDeployed = time.Now().Add(-10 * time.Minute)
	if err := cfg.Releases.Update(&pending); err != nil {
		t.Fatal(err)
	}
	annotate(t, ns, "busy", "test.rudder.dev/nudge", "1")
	crtest.WaitCondition(t, k8s, widgetGVK, ns, "busy", "Ready", metav1.ConditionTrue, "", timeout)
	h := helmtest.History(t, cluster.Kubeconfig, ns, "busy")
	if len(h) != 3 || h[1].Info.Status != common.StatusFailed || !strings.Contains(h[1].Info.Description, "unlocked by rudder") {
		t.Fatalf("history: %s", describe(h))
	}
}

// TestRollbackKeepsMaxHistory: a rollback by annotation prunes the history to the watch's
// maxHistory (3 here), like an upgrade.
func TestRollbackKeepsMaxHistory(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ns := crtest.NewNamespace(t, k8s, "t-")
	gvk := schema.GroupVersionKind{Group: "test.rudder.dev", Version: "v1", Kind: "HistoryProbe"}
	if err := k8s.Create(ctx, crtest.NewCR(gvk, ns, "h", map[string]any{"message": "one"})); err != nil {
		t.Fatal(err)
	}
	for i, msg := range []string{"two", "three"} {
		crtest.WaitCondition(t, k8s, gvk, ns, "h", "Ready", metav1.ConditionTrue, "", timeout)
		crtest.Update(t, k8s, gvk, ns, "h", func(u *unstructured.Unstructured) { u.Object["spec"] = map[string]any{"message": msg} })
		crtest.Eventually(t, fmt.Sprintf("revision %d", i+2), timeout, func(ctx context.Context) (bool, error) {
			u, err := crtest.Get(ctx, k8s, gvk, ns, "h")
			r, _, _ := unstructured.NestedInt64(u.Object, "status", "release", "revision")
			return err == nil && r == int64(i+2), err
		})
	}
	crtest.Update(t, k8s, gvk, ns, "h", func(u *unstructured.Unstructured) {
		u.SetAnnotations(map[string]string{machine.AnnotationRollbackTo: "1"})
	})
	crtest.WaitCondition(t, k8s, gvk, ns, "h", "RollbackRequest", metav1.ConditionTrue, "RolledBack", timeout)
	h := helmtest.History(t, cluster.Kubeconfig, ns, "h")
	if len(h) != 3 || h[0].Version != 2 || h[2].Version != 4 || !strings.Contains(h[2].Info.Description, "rollback to revision 1") {
		t.Fatalf("history: %s", describe(h))
	}
}
