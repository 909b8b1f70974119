package controllers_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rudder-operator/rudder/internal/crtest"
	"github.com/rudder-operator/rudder/internal/helm/helmtest"
	"github.com/rudder-operator/rudder/internal/records"
)

// TestDeletedWithKeepLeavesTheRelease (issue 61, leaving): a CR deleted with
// rudder.dev/on-delete: keep leaves its release and objects where they are — the same UIDs, the
// history — with nothing of rudder or of the CR on them, so that Kubernetes' garbage collector
// leaves them too and plain Helm upgrades them.
func TestDeletedWithKeepLeavesTheRelease(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ns := crtest.NewNamespace(t, k8s, "t-")
	const name = "kept"
	if err := k8s.Create(ctx, crtest.NewCR(widgetGVK, ns, name, map[string]any{"message": "before"})); err != nil {
		t.Fatal(err)
	}
	crtest.WaitCondition(t, k8s, widgetGVK, ns, name, "Ready", metav1.ConditionTrue, "", timeout)
	cr := crtest.MustGet(t, k8s, widgetGVK, ns, name)
	var cm corev1.ConfigMap
	var deploy appsv1.Deployment
	key := client.ObjectKey{Namespace: ns, Name: name}
	for _, o := range []client.Object{&cm, &deploy} {
		if err := k8s.Get(ctx, key, o); err != nil {
			t.Fatal(err)
		}
		if !ownedBy(o, cr.GetUID()) {
			t.Fatalf("%T %s has no owner reference to the CR before it is deleted", o, name)
		}
	}
	uids := []types.UID{cm.UID, deploy.UID}

	// A sentinel the garbage collector deletes once the CR is gone: what it does to the
	// release's objects, it has done by then.
	sentinel := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "sentinel", OwnerReferences: []metav1.OwnerReference{{
		APIVersion: widgetGVK.GroupVersion().String(), Kind: widgetGVK.Kind, Name: name, UID: cr.GetUID()}}}}
	if err := k8s.Create(ctx, sentinel); err != nil {
		t.Fatal(err)
	}
	crtest.Update(t, k8s, widgetGVK, ns, name, func(u *unstructured.Unstructured) {
		a := u.GetAnnotations()
		if a == nil {
			a = map[string]string{}
		}
		a["rudder.dev/on-delete"] = "keep"
		u.SetAnnotations(a)
	})
	if err := k8s.Delete(ctx, cr); err != nil {
		t.Fatal(err)
	}
	crtest.Eventually(t, "the CR gone, and the garbage collector done with its dependents", timeout, func(ctx context.Context) (bool, error) {
		_, err := crtest.Get(ctx, k8s, widgetGVK, ns, name)
		if !apierrors.IsNotFound(err) {
			return false, client.IgnoreNotFound(err)
		}
		err = k8s.Get(ctx, client.ObjectKeyFromObject(sentinel), &corev1.ConfigMap{})
		return apierrors.IsNotFound(err), client.IgnoreNotFound(err)
	})
	crtest.WaitEvent(t, k8s, ns, name, "LetGo", "release "+name+" and its objects kept", "2 objects")

	for i, o := range []client.Object{&cm, &deploy} {
		if err := k8s.Get(ctx, key, o); err != nil {
			t.Fatalf("the release's %T is gone: %v", o, err)
		}
		if o.GetUID() != uids[i] || ownedBy(o, cr.GetUID()) || o.GetLabels()[records.LabelManaged] != "" || o.GetAnnotations()[records.AnnotationOwner] != "" {
			t.Fatalf("%T %s: uid %s (was %s), owners %v, labels %v, annotations %v", o, name, o.GetUID(), uids[i], o.GetOwnerReferences(), o.GetLabels(), o.GetAnnotations())
		}
	}
	h := helmtest.History(t, cluster.Kubeconfig, ns, name)
	if len(h) != 1 || h[0].Info.Status != "deployed" {
		t.Fatalf("history: %s", describe(h))
	}
	if m := h[0].Manifest; strings.Contains(m, string(cr.GetUID())) || strings.Contains(m, records.AnnotationOwner) || strings.Contains(m, records.LabelManaged) {
		t.Fatalf("the record's manifest still names the CR or carries rudder's marks:\n%s", m)
	}
	var secrets corev1.SecretList
	if err := k8s.List(ctx, &secrets, client.InNamespace(ns), client.MatchingLabels{"owner": "helm", "name": name}); err != nil || len(secrets.Items) != 1 {
		t.Fatalf("the release's records: %v, %d", err, len(secrets.Items))
	}
	for k := range secrets.Items[0].Labels {
		if strings.HasPrefix(k, records.LabelPrefix) {
			t.Errorf("the record keeps rudder's label %s", k)
		}
	}

	// Plain Helm takes it from here: an upgrade changes the same objects.
	if out, err := helmCLI(t, "upgrade", name, filepath.Join(chartDir, "widget"), "-n", ns, "--set", "message=after"); err != nil {
		t.Fatalf("helm upgrade: %v\n%s", err, out)
	}
	if err := k8s.Get(ctx, key, &cm); err != nil || cm.UID != uids[0] || cm.Data["message"] != "after" {
		t.Fatalf("after helm upgrade: %v, uid %s, data %v", err, cm.UID, cm.Data)
	}
	if h := helmtest.History(t, cluster.Kubeconfig, ns, name); len(h) != 2 || h[1].Info.Status != "deployed" {
		t.Fatalf("history after helm upgrade: %s", describe(h))
	}
}

func ownedBy(o client.Object, uid types.UID) bool {
	for _, r := range o.GetOwnerReferences() {
		if r.UID == uid {
			return true
		}
	}
	return false
}
