package controllers_test

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	rstatus "github.com/rudder-operator/rudder/api/status"
	"github.com/rudder-operator/rudder/internal/crtest"
	"github.com/rudder-operator/rudder/internal/records"
)

// TestInstallMeetsExistingObjects: a client-side install does not ask Helm's existence
// questions before it creates (two GETs fewer per install); an object its create finds
// existing is met as Helm's check would have met it. One that carries Helm's metadata of the
// release and the CR's mark (left by an earlier incarnation of the CR, as
// helm.sh/resource-policy: keep leaves it) is adopted: the same object, updated to the
// manifest. A stranger's is refused with Helm's message, and left as it was.
func TestInstallMeetsExistingObjects(t *testing.T) {
	crtest.NeedsCluster(t)
	t.Parallel()
	ctx := context.Background()
	ns := crtest.NewNamespace(t, k8s, "unasked-")
	kept := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "kept",
		Labels: map[string]string{"app.kubernetes.io/managed-by": "Helm", records.LabelManaged: "true"},
		Annotations: map[string]string{"meta.helm.sh/release-name": "kept", "meta.helm.sh/release-namespace": ns,
			records.AnnotationOwner: records.OwnerAnnotation(widgetGVK.GroupKind(), types.NamespacedName{Namespace: ns, Name: "kept"})}},
		Data: map[string]string{"message": "left behind"}}
	theirs := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "theirs"}, Data: map[string]string{"message": "theirs"}}
	create(t, kept)
	create(t, theirs)

	create(t, crtest.NewCR(widgetGVK, ns, "kept", map[string]any{"message": "one"}))
	create(t, crtest.NewCR(widgetGVK, ns, "theirs", map[string]any{"message": "one"}))
	crtest.WaitCondition(t, k8s, widgetGVK, ns, "kept", rstatus.TypeReady, metav1.ConditionTrue, "", timeout)
	var cm corev1.ConfigMap
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "kept"}, &cm); err != nil {
		t.Fatal(err)
	}
	if cm.UID != kept.UID || cm.Data["message"] != "one" {
		t.Fatalf("the kept ConfigMap: uid %s (was %s), message %q; want the same object with the manifest's message", cm.UID, kept.UID, cm.Data["message"])
	}

	crtest.Eventually(t, "the stranger's ConfigMap refused", timeout, func(ctx context.Context) (bool, error) {
		u, err := crtest.Get(ctx, k8s, widgetGVK, ns, "theirs")
		if err != nil {
			return false, err
		}
		c := crtest.Condition(u, rstatus.TypeReleased)
		return c != nil && c.Status == metav1.ConditionFalse && c.Reason == rstatus.ReasonInstallFailed &&
			strings.Contains(c.Message, `ConfigMap "theirs" in namespace "`+ns+`" exists and cannot be imported into the current release`), nil
	})
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "theirs"}, &cm); err != nil {
		t.Fatal(err)
	}
	if cm.UID != theirs.UID || cm.Data["message"] != "theirs" || len(cm.Annotations) != 0 {
		t.Fatalf("the stranger's ConfigMap changed: %+v", cm.ObjectMeta)
	}
	// What the failed install created is removed; the stranger's ConfigMap stays.
	crtest.Eventually(t, "the failed install's Deployment removed", timeout, func(ctx context.Context) (bool, error) {
		u := &unstructured.Unstructured{}
		u.SetAPIVersion("apps/v1")
		u.SetKind("Deployment")
		err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "theirs"}, u)
		return client.IgnoreNotFound(err) == nil && err != nil, nil
	})
}
