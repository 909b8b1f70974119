package controllers_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"helm.sh/helm/v4/pkg/release/common"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/rudder-operator/rudder/controllers"
	"github.com/rudder-operator/rudder/internal/crtest"
	"github.com/rudder-operator/rudder/internal/helm"
	"github.com/rudder-operator/rudder/internal/helm/helmtest"
	"github.com/rudder-operator/rudder/internal/machine"
	"github.com/rudder-operator/rudder/internal/records"
	"github.com/rudder-operator/rudder/internal/watches"
)

// sprocketGVK is a kind the test manager does not watch: tests drive its Reconciler by hand.
var sprocketGVK = schema.GroupVersionKind{Group: "test.rudder.dev", Version: "v1", Kind: "Sprocket"}

// blindToReleases is a client whose cache has not seen any release Secret yet, as a cache can
// be right after another pass wrote one.
type blindToReleases struct{ client.Client }

func (b blindToReleases) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	if m, ok := list.(*metav1.PartialObjectMetadataList); ok && m.GetObjectKind().GroupVersionKind().Kind == "SecretList" {
		m.Items = nil
		return nil
	}
	return b.Client.List(ctx, list, opts...)
}

// sprocketReconciler is a Reconciler for Sprocket (the widget chart) that reads through c.
func sprocketReconciler(t *testing.T, c client.Client) *controllers.Reconciler {
	t.Helper()
	wf := filepath.Join(chartDir, "sprocket-watches.yaml")
	if err := os.WriteFile(wf, []byte("- {group: test.rudder.dev, version: v1, kind: Sprocket, chart: widget}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	ws, err := watches.Load(wf)
	if err != nil {
		t.Fatal(err)
	}
	hc, err := helm.NewClient(helm.ClientOptions{Config: cluster.Config, Mapper: k8s.RESTMapper(), Scheme: k8s.Scheme(), Log: ctrl.Log})
	if err != nil {
		t.Fatal(err)
	}
	r, err := controllers.New(controllers.Options{Watch: ws[0], Charts: charts, Helm: machine.ReleasesOf(hc), Client: c, APIReader: k8s})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func reconcileOnce(t *testing.T, r *controllers.Reconciler, ns, name string) {
	t.Helper()
	if _, err := r.Reconcile(context.Background(), reconcile.Request{NamespacedName: client.ObjectKey{Namespace: ns, Name: name}}); err != nil {
		t.Fatalf("reconcile %s/%s: %v", ns, name, err)
	}
}

// A new CR is installed without reading storage first (Helm's install checks the name
// itself). When the release exists after all and only the cache does not show it, storage
// decides: the release is neither installed again nor removed as a failed install.
func TestReleaseTheCacheDoesNotShowIsKept(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ns := crtest.NewNamespace(t, k8s, "t-")
	r := sprocketReconciler(t, blindToReleases{k8s})
	if err := k8s.Create(ctx, crtest.NewCR(sprocketGVK, ns, "s", map[string]any{"message": "one"})); err != nil {
		t.Fatal(err)
	}
	reconcileOnce(t, r, ns, "s")
	if h := helmtest.History(t, cluster.Kubeconfig, ns, "s"); len(h) != 1 || h[0].Info.Status != common.StatusDeployed {
		t.Fatalf("after the first pass: %s", describe(h))
	}

	// The status that names the release is lost too: nothing but storage knows it now.
	u, err := crtest.Get(ctx, k8s, sprocketGVK, ns, "s")
	if err != nil {
		t.Fatal(err)
	}
	delete(u.Object, "status")
	if err := k8s.Status().Update(ctx, u); err != nil {
		t.Fatal(err)
	}
	reconcileOnce(t, r, ns, "s")
	if h := helmtest.History(t, cluster.Kubeconfig, ns, "s"); len(h) != 1 || h[0].Info.Status != common.StatusDeployed {
		t.Fatalf("the existing release was changed: %s", describe(h))
	}
	var cm corev1.ConfigMap
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "s"}, &cm); err != nil || cm.Data["message"] != "one" {
		t.Fatalf("operand: %v %v", err, cm.Data)
	}
	u, err = crtest.Get(ctx, k8s, sprocketGVK, ns, "s")
	if err != nil {
		t.Fatal(err)
	}
	if rev, _, _ := unstructured.NestedInt64(u.Object, "status", "release", "revision"); rev != 1 {
		t.Errorf("status.release.revision = %d, want 1", rev)
	}
	if c := crtest.Condition(u, "Released"); c == nil || c.Status != metav1.ConditionTrue {
		t.Errorf("Released = %+v, want True", c)
	}

	// Deletion still uninstalls through the finalizer.
	if err := k8s.Delete(ctx, u); err != nil {
		t.Fatal(err)
	}
	reconcileOnce(t, r, ns, "s")
	if _, err := crtest.Get(ctx, k8s, sprocketGVK, ns, "s"); !apierrors.IsNotFound(err) {
		t.Fatalf("CR after deletion: %v", err)
	}
	if h := helmtest.History(t, cluster.Kubeconfig, ns, "s"); len(h) != 0 {
		t.Fatalf("release after deletion: %s", describe(h))
	}
}

// A release of the CR's name that rudder did not make (here: plain helm) is never taken over,
// and no trace of the refused install is left.
func TestReleaseNotMadeByRudderIsNeverTakenOver(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ns := crtest.NewNamespace(t, k8s, "t-")
	if out, err := helmCLI(t, "install", "theirs", filepath.Join(chartDir, "widget"), "-n", ns, "--set", "message=theirs"); err != nil {
		t.Fatalf("helm install: %v\n%s", err, out)
	}
	if err := k8s.Create(ctx, crtest.NewCR(widgetGVK, ns, "theirs", map[string]any{"message": "ours"})); err != nil {
		t.Fatal(err)
	}
	u := crtest.WaitCondition(t, k8s, widgetGVK, ns, "theirs", "Stalled", metav1.ConditionTrue, "ReleaseNameConflict", timeout)
	if msg := crtest.Condition(u, "Stalled").Message; !strings.Contains(msg, "something other than rudder") {
		t.Errorf("conflict message: %s", msg)
	}
	if h := helmtest.History(t, cluster.Kubeconfig, ns, "theirs"); len(h) != 1 || h[0].Info.Status != common.StatusDeployed || h[0].Labels[records.LabelOwnerUID] != "" {
		t.Fatalf("helm's release was touched: %s", describe(h))
	}
	var cm corev1.ConfigMap
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "theirs"}, &cm); err != nil || cm.Data["message"] != "theirs" {
		t.Fatalf("helm's operand was touched: %v %v", err, cm.Data)
	}
}
