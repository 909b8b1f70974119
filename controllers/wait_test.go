package controllers_test

import (
	"context"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	rstatus "github.com/rudder-operator/rudder/api/status"
	"github.com/rudder-operator/rudder/internal/crtest"
	"github.com/rudder-operator/rudder/internal/helm/helmtest"
)

// A watch's wait (issue 47, item 4), on the waited chart (a ConfigMap, and a Deployment whose
// Pods ask for a node that does not exist, so it never becomes ready): WaitAll waits for every
// object, WaitScoped for ConfigMaps alone; both may wait 10 minutes.

var (
	waitAllGVK    = schema.GroupVersionKind{Group: "test.rudder.dev", Version: "v1", Kind: "WaitAll"}
	waitScopedGVK = schema.GroupVersionKind{Group: "test.rudder.dev", Version: "v1", Kind: "WaitScoped"}
)

// TestWaitIsScopedAndEndsWithTheCR: an install that waits for every object holds its release
// pending while the Deployment is not ready; one scoped to ConfigMaps is deployed at once (its
// Ready condition still says the Deployment is not ready); deleting the CR whose install waits
// ends the wait at once, not at the 10-minute action timeout, and its release is uninstalled.
func TestWaitIsScopedAndEndsWithTheCR(t *testing.T) {
	crtest.NeedsCluster(t)
	t.Parallel()
	ctx := context.Background()
	ns := crtest.NewNamespace(t, k8s, "wait-")
	spec := map[string]any{"nodeSelector": map[string]any{"pool": "nowhere"}}
	create(t, crtest.NewCR(waitAllGVK, ns, "all", spec))
	create(t, crtest.NewCR(waitScopedGVK, ns, "scoped", spec))

	crtest.WaitCondition(t, k8s, waitScopedGVK, ns, "scoped", rstatus.TypeReleased, metav1.ConditionTrue, "", timeout)
	if h := helmtest.History(t, cluster.Kubeconfig, ns, "scoped"); len(h) != 1 || h[0].Info.Status != "deployed" {
		t.Fatalf("the scoped wait's release: %v, want revision 1 deployed", h)
	}
	if c := crtest.Condition(crtest.WaitCondition(t, k8s, waitScopedGVK, ns, "scoped", rstatus.TypeReady, metav1.ConditionFalse, "", timeout),
		rstatus.TypeReady); c == nil {
		t.Fatal("no Ready condition")
	}

	crtest.Eventually(t, "the install waiting", timeout, func(context.Context) (bool, error) {
		h := helmtest.History(t, cluster.Kubeconfig, ns, "all")
		return len(h) == 1 && h[0].Info.Status == "pending-install", nil
	})
	if err := k8s.Delete(ctx, crtest.NewCR(waitAllGVK, ns, "all", nil)); err != nil {
		t.Fatal(err)
	}
	crtest.Eventually(t, "the waiting CR deleted", timeout, func(ctx context.Context) (bool, error) {
		_, err := crtest.Get(ctx, k8s, waitAllGVK, ns, "all")
		return apierrors.IsNotFound(err), nil
	})
	if h := helmtest.History(t, cluster.Kubeconfig, ns, "all"); len(h) != 0 {
		t.Fatalf("the deleted CR's release is left: %v", h)
	}
	if _, err := crtest.Get(ctx, k8s, schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}, ns, "all"); !apierrors.IsNotFound(err) {
		t.Fatalf("the deleted CR's Deployment: %v", err)
	}
}
