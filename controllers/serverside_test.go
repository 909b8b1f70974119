package controllers_test

import (
	"context"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	rstatus "github.com/rudder-operator/rudder/api/status"
	"github.com/rudder-operator/rudder/internal/crtest"
	"github.com/rudder-operator/rudder/internal/guard"
	"github.com/rudder-operator/rudder/internal/helm"
	"github.com/rudder-operator/rudder/internal/helm/helmtest"
)

// Server-side apply, per watch (issue 47, item 3), on the day2 chart: SSAProbe installs
// server-side and ignores a Deployment's replicas; SSAMove installs client-side and moves its
// releases on their next upgrade; SSAConflict and SSAForce install server-side and differ in
// upgrade.forceConflicts (drift detection off, so that a change stays until the upgrade).

var (
	ssaProbeGVK    = schema.GroupVersionKind{Group: "test.rudder.dev", Version: "v1", Kind: "SSAProbe"}
	ssaMoveGVK     = schema.GroupVersionKind{Group: "test.rudder.dev", Version: "v1", Kind: "SSAMove"}
	ssaConflictGVK = schema.GroupVersionKind{Group: "test.rudder.dev", Version: "v1", Kind: "SSAConflict"}
	ssaForceGVK    = schema.GroupVersionKind{Group: "test.rudder.dev", Version: "v1", Kind: "SSAForce"}
	ssaReplaceGVK  = schema.GroupVersionKind{Group: "test.rudder.dev", Version: "v1", Kind: "SSAReplace"}
)

// managerEntries are the operations of obj's managedFields entries of manager (the main
// resource's, not a subresource's).
func managerEntries(obj metav1.Object, manager string) []metav1.ManagedFieldsOperationType {
	var ops []metav1.ManagedFieldsOperationType
	for _, e := range obj.GetManagedFields() {
		if e.Manager == manager && e.Subresource == "" {
			ops = append(ops, e.Operation)
		}
	}
	return ops
}

// TestServerSideApplyWatch: a release of a watch with install.serverSideApply is applied
// server-side as rudder's field manager and records it; drift is restored by server-side apply
// with no new revision: the edited image comes back, the ignored replicas keep the HPA's value
// rather than being let go, a field only another manager set stays, and so does the ownership
// metadata Helm puts on as it applies. The request guard holds for an apply as for any patch.
func TestServerSideApplyWatch(t *testing.T) {
	crtest.NeedsCluster(t)
	t.Parallel()
	ctx := context.Background()
	ns := crtest.NewNamespace(t, k8s, "ssa-")
	create(t, crtest.NewCR(ssaProbeGVK, ns, "s", map[string]any{}))
	cr := crtest.WaitCondition(t, k8s, ssaProbeGVK, ns, "s", rstatus.TypeReady, metav1.ConditionTrue, "", timeout)
	if h := helmtest.History(t, cluster.Kubeconfig, ns, "s"); len(h) != 1 || h[0].ApplyMethod != "ssa" {
		t.Fatalf("history %v, want one revision applied server-side", h)
	}
	if ops := managerEntries(deployment(t, ns, "s"), helm.FieldManager); len(ops) != 1 || ops[0] != metav1.ManagedFieldsOperationApply {
		t.Fatalf("rudder's managedFields entries of the Deployment are %v, want one Apply", ops)
	}

	// Another writer's annotation (not a field of the manifest), then an HPA's replicas and an
	// edited image.
	dep := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "s"}}
	if err := k8s.Patch(ctx, dep, client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"annotations":{"team":"payments"}}}`)), client.FieldOwner("someone")); err != nil {
		t.Fatal(err)
	}
	hpaWrite(t, ns, "s")
	crtest.Eventually(t, "the image restored", timeout, func(ctx context.Context) (bool, error) {
		return deployment(t, ns, "s").Spec.Template.Spec.Containers[0].Image == "nginx:1", nil
	})
	crtest.WaitEvent(t, k8s, ns, "s", rstatus.ReasonDriftCorrected, "Deployment/"+ns+"/s (reverted)")
	dep = deployment(t, ns, "s")
	if *dep.Spec.Replicas != 3 {
		t.Errorf("replicas %d after the restore, want the HPA's 3 (ignored, kept as live)", *dep.Spec.Replicas)
	}
	if dep.Annotations["team"] != "payments" {
		t.Errorf("another manager's annotation is gone: %v", dep.Annotations)
	}
	if dep.Labels["app.kubernetes.io/managed-by"] != "Helm" || dep.Annotations["meta.helm.sh/release-name"] != "s" {
		t.Errorf("Helm's ownership metadata is gone after the restore: %v %v", dep.Labels, dep.Annotations)
	}
	if h := helmtest.History(t, cluster.Kubeconfig, ns, "s"); len(h) != 1 {
		t.Fatalf("%d revisions after the restore, want 1", len(h))
	}

	// The Writer drift goes through: an apply to what the release made passes, an apply to an
	// object it did not make is refused before it is sent, and the object is left as it was.
	hc, err := helm.NewClient(helm.ClientOptions{Config: cluster.Config, Mapper: k8s.RESTMapper(), Scheme: k8s.Scheme(), Log: ctrl.Log})
	if err != nil {
		t.Fatal(err)
	}
	w, err := hc.Objects.Writer(helm.Scope{Confinement: guard.Confinement{Namespace: ns},
		Owner: guard.Owner{GVK: ssaProbeGVK, Key: types.NamespacedName{Namespace: ns, Name: "s"}, UID: cr.GetUID()}})
	if err != nil {
		t.Fatal(err)
	}
	create(t, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "theirs"}, Data: map[string]string{"tier": "theirs"}})
	apply := func(name string) error {
		u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
			"metadata": map[string]any{"name": name, "namespace": ns}, "data": map[string]any{"tier": "a"}}}
		return w.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner(helm.FieldManager), client.ForceOwnership)
	}
	if err := apply("s"); err != nil {
		t.Fatalf("applying the release's own ConfigMap: %v", err)
	}
	if err := apply("theirs"); !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "not made by this release") {
		t.Fatalf("an apply to another's ConfigMap: %v, want refused by the guard", err)
	}
	var theirs corev1.ConfigMap
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "theirs"}, &theirs); err != nil || theirs.Data["tier"] != "theirs" {
		t.Fatalf("another's ConfigMap: %v %v", theirs.Data, err)
	}
}

// TestClientSideReleaseMovesToServerSide: a release a watch installed client-side moves to
// server-side apply on its first upgrade once the watch says upgrade.serverSideApply: true, its
// fields migrated from rudder's client-side entry to its apply (Helm's managed-fields
// migration), with no conflict.
func TestClientSideReleaseMovesToServerSide(t *testing.T) {
	crtest.NeedsCluster(t)
	t.Parallel()
	ns := crtest.NewNamespace(t, k8s, "ssa-move-")
	create(t, crtest.NewCR(ssaMoveGVK, ns, "m", map[string]any{}))
	crtest.WaitCondition(t, k8s, ssaMoveGVK, ns, "m", rstatus.TypeReady, metav1.ConditionTrue, "", timeout)
	if h := helmtest.History(t, cluster.Kubeconfig, ns, "m"); len(h) != 1 || h[0].ApplyMethod == "ssa" {
		t.Fatalf("history %v, want one revision applied client-side", h)
	}
	if ops := managerEntries(deployment(t, ns, "m"), helm.FieldManager); len(ops) != 1 || ops[0] != metav1.ManagedFieldsOperationUpdate {
		t.Fatalf("rudder's managedFields entries of the Deployment are %v, want one Update", ops)
	}
	patch(t, ssaMoveGVK, ns, "m", `{"spec":{"image":"nginx:2"}}`)
	crtest.Eventually(t, "revision 2 deployed", timeout, func(context.Context) (bool, error) {
		h := helmtest.History(t, cluster.Kubeconfig, ns, "m")
		return len(h) == 2 && h[1].Info.Status == "deployed", nil
	})
	if h := helmtest.History(t, cluster.Kubeconfig, ns, "m"); h[1].ApplyMethod != "ssa" {
		t.Fatalf("revision 2's apply method is %q, want ssa", h[1].ApplyMethod)
	}
	dep := deployment(t, ns, "m")
	if ops := managerEntries(dep, helm.FieldManager); len(ops) != 1 || ops[0] != metav1.ManagedFieldsOperationApply {
		t.Fatalf("rudder's managedFields entries after the move are %v, want its client-side entry migrated to one Apply", ops)
	}
	if dep.Spec.Template.Spec.Containers[0].Image != "nginx:2" {
		t.Fatalf("image %s, want nginx:2", dep.Spec.Template.Spec.Containers[0].Image)
	}
}

// TestServerSideConflicts: a field another manager took is a conflict for the next upgrade's
// apply: reported (the Ready condition names the field and its manager) and left as it is without
// upgrade.forceConflicts; taken back with it.
func TestServerSideConflicts(t *testing.T) {
	crtest.NeedsCluster(t)
	t.Parallel()
	ns := crtest.NewNamespace(t, k8s, "ssa-conflict-")
	for _, gvk := range []schema.GroupVersionKind{ssaConflictGVK, ssaForceGVK} {
		name := strings.ToLower(gvk.Kind)
		create(t, crtest.NewCR(gvk, ns, name, map[string]any{}))
		crtest.WaitCondition(t, k8s, gvk, ns, name, rstatus.TypeReady, metav1.ConditionTrue, "", timeout)
		hpaWrite(t, ns, name)
		patch(t, gvk, ns, name, `{"spec":{"replicas":2}}`)
	}
	crtest.Eventually(t, "the conflict reported", timeout, func(ctx context.Context) (bool, error) {
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(ssaConflictGVK)
		if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "ssaconflict"}, u); err != nil {
			return false, err
		}
		c := crtest.Condition(u, rstatus.TypeReady)
		return c != nil && c.Status == metav1.ConditionFalse && c.Reason == rstatus.ReasonUpgradeFailed &&
			strings.Contains(c.Message, `conflicts with "hpa"`) && strings.Contains(c.Message, ".spec.replicas"), nil
	})
	if dep := deployment(t, ns, "ssaconflict"); dep.Spec.Template.Spec.Containers[0].Image != "nginx:edited" || *dep.Spec.Replicas != 3 {
		t.Errorf("without forceConflicts the other manager's fields changed: image %s, replicas %d", dep.Spec.Template.Spec.Containers[0].Image, *dep.Spec.Replicas)
	}
	u := crtest.WaitCondition(t, k8s, ssaForceGVK, ns, "ssaforce", rstatus.TypeReady, metav1.ConditionTrue, "", timeout)
	if rev, _, _ := unstructured.NestedInt64(u.Object, "status", "release", "revision"); rev != 2 {
		t.Fatalf("ssaforce: revision %d, want 2", rev)
	}
	if dep := deployment(t, ns, "ssaforce"); dep.Spec.Template.Spec.Containers[0].Image != "nginx:1" || *dep.Spec.Replicas != 2 {
		t.Errorf("with forceConflicts: image %s, replicas %d; want nginx:1 and 2", dep.Spec.Template.Spec.Containers[0].Image, *dep.Spec.Replicas)
	}
}

// TestServerSideForcedReplace: upgrade.force on a release that applies server-side replaces
// the Deployment whose selector an upgrade changes (asked with a dry-run apply, created again
// by an apply) in one new revision, and the new Deployment's fields are rudder's apply.
func TestServerSideForcedReplace(t *testing.T) {
	crtest.NeedsCluster(t)
	t.Parallel()
	ns := crtest.NewNamespace(t, k8s, "ssa-replace-")
	create(t, crtest.NewCR(ssaReplaceGVK, ns, "r", map[string]any{}))
	crtest.WaitCondition(t, k8s, ssaReplaceGVK, ns, "r", rstatus.TypeReady, metav1.ConditionTrue, "", timeout)
	oldUID := deployment(t, ns, "r").UID
	patch(t, ssaReplaceGVK, ns, "r", `{"spec":{"tier":"b"}}`)
	crtest.WaitEvent(t, k8s, ns, "r", rstatus.ReasonReplaced, "Deployment/"+ns+"/r")
	crtest.Eventually(t, "revision 2 deployed", timeout, func(context.Context) (bool, error) {
		h := helmtest.History(t, cluster.Kubeconfig, ns, "r")
		return len(h) == 2 && h[1].Info.Status == "deployed" && h[1].ApplyMethod == "ssa", nil
	})
	dep := deployment(t, ns, "r")
	if dep.UID == oldUID || dep.Spec.Selector.MatchLabels["tier"] != "b" {
		t.Fatalf("Deployment not replaced: uid %s (was %s), selector %v", dep.UID, oldUID, dep.Spec.Selector.MatchLabels)
	}
	if ops := managerEntries(dep, helm.FieldManager); len(ops) != 1 || ops[0] != metav1.ManagedFieldsOperationApply {
		t.Fatalf("rudder's managedFields entries of the new Deployment are %v, want one Apply", ops)
	}
}
