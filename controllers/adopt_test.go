package controllers_test

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"helm.sh/helm/v4/pkg/action"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	"helm.sh/helm/v4/pkg/kube"
	"helm.sh/helm/v4/pkg/release/common"
	release "helm.sh/helm/v4/pkg/release/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rudder-operator/rudder/internal/crtest"
	"github.com/rudder-operator/rudder/internal/helm/helmtest"
	"github.com/rudder-operator/rudder/internal/records"
)

// sdkFinalizer is the finalizer operator-sdk's helm-operator puts on its CRs.
const sdkFinalizer = "helm.sdk.operatorframework.io/uninstall-release"

// pausedWidget makes a Widget that rudder leaves alone (rudder.dev/paused) while a test makes
// its release as another operator would, with finalizers added.
func pausedWidget(t *testing.T, ns, name, message string, finalizers ...string) *unstructured.Unstructured {
	t.Helper()
	cr := crtest.NewCR(widgetGVK, ns, name, map[string]any{"message": message})
	cr.SetAnnotations(map[string]string{"rudder.dev/paused": "true"})
	cr.SetFinalizers(finalizers)
	if err := k8s.Create(context.Background(), cr); err != nil {
		t.Fatal(err)
	}
	crtest.WaitCondition(t, k8s, widgetGVK, ns, name, "Paused", metav1.ConditionTrue, "", timeout)
	return crtest.MustGet(t, k8s, widgetGVK, ns, name)
}

// installAsSDK installs the widget chart as release name with values, with Helm's SDK and
// storage, as operator-sdk's helm-operator v1.42 does for a CR: one release per CR, named after
// it, in its namespace, the values the CR's spec. Its kube client then gives each object it
// applies a controller reference to the CR (owner, when set) and the label
// helm.sdk.operatorframework.io/chart, which the release's record does not hold: here they are
// written onto the objects after the install, as the SDK's Build leaves them.
func installAsSDK(t *testing.T, ns, name string, values map[string]any, owner *unstructured.Unstructured) []client.Object {
	t.Helper()
	ch, err := loader.Load(filepath.Join(chartDir, "widget"))
	if err != nil {
		t.Fatal(err)
	}
	in := action.NewInstall(helmtest.Config(t, cluster.Kubeconfig, ns))
	// The SDK is built on Helm 3's SDK, which applies client-side.
	in.ReleaseName, in.Namespace, in.WaitStrategy, in.ServerSideApply = name, ns, kube.HookOnlyStrategy, false
	if _, err := in.Run(ch, values); err != nil {
		t.Fatalf("installing %s as the SDK: %v", name, err)
	}
	meta := map[string]any{"labels": map[string]any{"helm.sdk.operatorframework.io/chart": "widget"}}
	if owner != nil {
		meta["ownerReferences"] = []metav1.OwnerReference{*metav1.NewControllerRef(owner, owner.GroupVersionKind())}
	}
	patch, err := json.Marshal(map[string]any{"metadata": meta})
	if err != nil {
		t.Fatal(err)
	}
	objs := []client.Object{&corev1.ConfigMap{}, &appsv1.Deployment{}}
	for _, o := range objs {
		o.SetNamespace(ns)
		o.SetName(name)
		if err := k8s.Patch(context.Background(), o, client.RawPatch(types.MergePatchType, patch)); err != nil {
			t.Fatal(err)
		}
	}
	return objs
}

func unpause(t *testing.T, ns, name string) {
	t.Helper()
	crtest.Update(t, k8s, widgetGVK, ns, name, func(u *unstructured.Unstructured) {
		a := u.GetAnnotations()
		delete(a, "rudder.dev/paused")
		u.SetAnnotations(a)
	})
}

// TestAdoptsAnOperatorSDKRelease (issue 61): rudder, started on the kind an operator-sdk
// helm-operator served, takes the SDK's release over on the proof its objects give — no
// uninstall, the same object UIDs, revision 1 kept, no new revision (the chart and values are
// the CR's) — replaces the SDK's finalizer with its own, then upgrades, keeps a helm rollback
// and uninstalls on delete, as for any release of its own.
func TestAdoptsAnOperatorSDKRelease(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ns := crtest.NewNamespace(t, k8s, "t-")
	const name = "sdk"
	cr := pausedWidget(t, ns, name, "one", sdkFinalizer)
	objs := installAsSDK(t, ns, name, map[string]any{"message": "one"}, cr)
	uids := map[string]types.UID{}
	for _, o := range objs {
		uids[kindOf(o)+o.GetName()] = o.GetUID()
	}

	unpause(t, ns, name)
	crtest.WaitCondition(t, k8s, widgetGVK, ns, name, "Ready", metav1.ConditionTrue, "", timeout)
	crtest.WaitEvent(t, k8s, ns, name, "Adopted", "release sdk adopted from operator-sdk's helm-operator", "2 objects of revision 1", "no new revision")
	if h := helmtest.History(t, cluster.Kubeconfig, ns, name); len(h) != 1 || h[0].Info.Status != common.StatusDeployed ||
		h[0].Labels[records.LabelOwnerUID] != string(cr.GetUID()) {
		t.Fatalf("adopting made a revision, or did not label the record: %s, labels %v", describe(h), h[0].Labels)
	}
	crtest.Eventually(t, "the SDK's finalizer replaced by rudder's", timeout, func(ctx context.Context) (bool, error) {
		u, err := crtest.Get(ctx, k8s, widgetGVK, ns, name)
		if err != nil {
			return false, err
		}
		f := u.GetFinalizers()
		return len(f) == 1 && f[0] == "rudder.dev/uninstall-release", nil
	})
	sameObjects := func(when string) {
		t.Helper()
		for _, o := range []client.Object{&corev1.ConfigMap{}, &appsv1.Deployment{}} {
			if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, o); err != nil {
				t.Fatalf("%s: %v", when, err)
			}
			if uid := uids[kindOf(o)+name]; o.GetUID() != uid {
				t.Fatalf("%s: %s %s was recreated: uid %s, was %s", when, kindOf(o), name, o.GetUID(), uid)
			}
			if o.GetAnnotations()[records.AnnotationOwner] == "" || o.GetLabels()[records.LabelManaged] != "true" {
				t.Fatalf("%s: %s %s lacks rudder's marks: %v %v", when, kindOf(o), name, o.GetLabels(), o.GetAnnotations())
			}
		}
	}
	sameObjects("adopted")

	// An upgrade, as for any release of rudder's.
	setSpec(t, ns, name, "two")
	waitRevision(t, ns, name, 2, 0)
	sameObjects("upgraded")
	if got := configMapMessage(t, ns, name); got != "two" {
		t.Fatalf("after the upgrade the ConfigMap says %q", got)
	}
	// A helm rollback sticks.
	if out, err := helmCLI(t, "rollback", name, "1", "-n", ns); err != nil {
		t.Fatalf("helm rollback: %v\n%s", err, out)
	}
	waitRevision(t, ns, name, 3, 1)
	if got := configMapMessage(t, ns, name); got != "one" {
		t.Fatalf("after helm rollback the ConfigMap says %q", got)
	}
	// Deleting the CR uninstalls the release.
	if err := k8s.Delete(ctx, crtest.MustGet(t, k8s, widgetGVK, ns, name)); err != nil {
		t.Fatal(err)
	}
	crtest.Eventually(t, "the CR and its release gone", timeout, func(ctx context.Context) (bool, error) {
		if _, err := crtest.Get(ctx, k8s, widgetGVK, ns, name); !apierrors.IsNotFound(err) {
			return false, client.IgnoreNotFound(err)
		}
		err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &corev1.ConfigMap{})
		return apierrors.IsNotFound(err) && len(helmtest.History(t, cluster.Kubeconfig, ns, name)) == 0, client.IgnoreNotFound(err)
	})
}

// TestAdoptionNeedsProof (issue 61): a release of the CR's name that rudder did not make is
// taken over only on its objects' word: one whose objects are another CR's, one made by plain
// helm (no owner reference), and a forged record naming an object someone else made adopt
// nothing — the CR is Stalled (ReleaseNameConflict) naming the object and why, and the
// objects and history are as they were.
func TestAdoptionNeedsProof(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ns := crtest.NewNamespace(t, k8s, "t-")
	other := pausedWidget(t, ns, "other", "x")

	cases := map[string]struct {
		lay  func(t *testing.T, cr *unstructured.Unstructured)
		says string
	}{
		// Another team's release, marked as their CR's.
		"theirs": {func(t *testing.T, _ *unstructured.Unstructured) {
			installAsSDK(t, ns, "theirs", map[string]any{"message": "x"}, other)
		}, "has no owner reference to this Widget"},
		// helm install: nothing says it is the CR's.
		"plain": {func(t *testing.T, _ *unstructured.Unstructured) {
			installAsSDK(t, ns, "plain", map[string]any{"message": "x"}, nil)
		}, "has neither an owner reference to this Widget"},
		// A record written by hand, naming another app's ConfigMap as the release's.
		"forged": {func(t *testing.T, _ *unstructured.Unstructured) {
			victim := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "forged"}, Data: map[string]string{"password": "hunter2"}}
			if err := k8s.Create(ctx, victim); err != nil {
				t.Fatal(err)
			}
			ch, err := loader.Load(filepath.Join(chartDir, "widget"))
			if err != nil {
				t.Fatal(err)
			}
			rel := &release.Release{Name: "forged", Namespace: ns, Version: 1, Chart: ch, Config: map[string]any{"message": "x"},
				Info:     &release.Info{Status: common.StatusDeployed, Description: "Install complete"},
				Manifest: "---\n# Source: widget/templates/all.yaml\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: forged\n"}
			if err := helmtest.Config(t, cluster.Kubeconfig, ns).Releases.Create(rel); err != nil {
				t.Fatal(err)
			}
		}, "/forged of revision 1 has neither an owner reference"},
	}
	for name, c := range cases {
		cr := pausedWidget(t, ns, name, "x")
		c.lay(t, cr)
		unpause(t, ns, name)
	}
	for name, c := range cases {
		u := crtest.WaitCondition(t, k8s, widgetGVK, ns, name, "Stalled", metav1.ConditionTrue, "ReleaseNameConflict", timeout)
		msg := crtest.Condition(u, "Stalled").Message
		if !strings.Contains(msg, c.says) || !strings.Contains(msg, "ConfigMap") || !strings.Contains(msg, "does not prove it is this CR's") {
			t.Errorf("%s: Stalled does not name the object and why: %s", name, msg)
		}
		if h := helmtest.History(t, cluster.Kubeconfig, ns, name); len(h) != 1 || h[0].Labels[records.LabelOwnerUID] != "" {
			t.Errorf("%s: the release changed: %s", name, describe(h))
		}
		var cm corev1.ConfigMap
		if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &cm); err != nil || cm.Annotations[records.AnnotationOwner] != "" ||
			cm.Labels[records.LabelManaged] != "" {
			t.Errorf("%s: its ConfigMap was marked: %v %v", name, err, cm.Annotations)
		}
		if crtest.CountEvents(t, k8s, ns, name, "Adopted") != 0 {
			t.Errorf("%s: adopted", name)
		}
	}
}

// kindOf is an object's kind as these tests key it.
func kindOf(o client.Object) string {
	switch o.(type) {
	case *corev1.ConfigMap:
		return "ConfigMap"
	case *appsv1.Deployment:
		return "Deployment"
	}
	return ""
}

// TestAdoptsAClaimedHelmRelease (issue 61): a release made with plain helm install is taken
// over once it is handed over — its newest record carries rudder.dev/values-for naming the
// CR, written by someone who may write the namespace's Secrets — with the same objects and no
// new revision; without the claim it is refused (TestAdoptionNeedsProof, "plain").
func TestAdoptsAClaimedHelmRelease(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ns := crtest.NewNamespace(t, k8s, "t-")
	const name = "handed"
	pausedWidget(t, ns, name, "x")
	objs := installAsSDK(t, ns, name, map[string]any{"message": "x"}, nil)
	var rec corev1.Secret
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: records.RecordPrefix + name + ".v1"}, &rec); err != nil {
		t.Fatal(err)
	}
	patch := client.MergeFrom(rec.DeepCopy())
	rec.Annotations = map[string]string{"rudder.dev/values-for": "Widget.test.rudder.dev/" + name}
	if err := k8s.Patch(ctx, &rec, patch); err != nil {
		t.Fatal(err)
	}
	unpause(t, ns, name)
	crtest.WaitCondition(t, k8s, widgetGVK, ns, name, "Ready", metav1.ConditionTrue, "", timeout)
	crtest.WaitEvent(t, k8s, ns, name, "Adopted", "adopted from helm (handed over", "no new revision")
	if h := helmtest.History(t, cluster.Kubeconfig, ns, name); len(h) != 1 {
		t.Fatalf("adopting made a revision: %s", describe(h))
	}
	for _, o := range objs {
		uid := o.GetUID()
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(o), o); err != nil || o.GetUID() != uid || o.GetAnnotations()[records.AnnotationOwner] == "" {
			t.Fatalf("%s: %v, uid %s (was %s), annotations %v", kindOf(o), err, o.GetUID(), uid, o.GetAnnotations())
		}
	}
}

var takeGVK = schema.GroupVersionKind{Group: "test.rudder.dev", Version: "v1", Kind: "TakeProbe"}

// TestTakeOwnershipOfClaimedObjects (issue 61): with install.takeOwnership, an object the release
// renders that exists outside any release is taken into it when it claims the CR
// (rudder.dev/values-for) — the same object, now the release's — and refused, unchanged, when
// it does not; a watch without the policy takes nothing, claimed or not.
func TestTakeOwnershipOfClaimedObjects(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ns := crtest.NewNamespace(t, k8s, "t-")
	existing := func(name, claim string) *corev1.ConfigMap {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Data: map[string]string{"message": "old"}}
		if claim != "" {
			cm.Annotations = map[string]string{"rudder.dev/values-for": claim}
		}
		if err := k8s.Create(ctx, cm); err != nil {
			t.Fatal(err)
		}
		return cm
	}
	claimed := existing("claimed", "TakeProbe.test.rudder.dev/claimed")
	unclaimed := existing("unclaimed", "")
	elsewhere := existing("elsewhere", "Widget.test.rudder.dev/elsewhere")
	for _, cr := range []*unstructured.Unstructured{
		crtest.NewCR(takeGVK, ns, "claimed", map[string]any{"message": "new"}),
		crtest.NewCR(takeGVK, ns, "unclaimed", map[string]any{"message": "new"}),
		crtest.NewCR(widgetGVK, ns, "elsewhere", map[string]any{"message": "new"}),
	} {
		if err := k8s.Create(ctx, cr); err != nil {
			t.Fatal(err)
		}
	}

	crtest.WaitCondition(t, k8s, takeGVK, ns, "claimed", "Ready", metav1.ConditionTrue, "", timeout)
	var cm corev1.ConfigMap
	if err := k8s.Get(ctx, client.ObjectKeyFromObject(claimed), &cm); err != nil || cm.UID != claimed.UID || cm.Data["message"] != "new" ||
		cm.Annotations[records.AnnotationOwner] == "" {
		t.Fatalf("the claimed ConfigMap: %v, uid %s (was %s), data %v, annotations %v", err, cm.UID, claimed.UID, cm.Data, cm.Annotations)
	}
	if h := helmtest.History(t, cluster.Kubeconfig, ns, "claimed"); len(h) != 1 || h[0].Info.Status != common.StatusDeployed {
		t.Fatalf("history: %s", describe(h))
	}

	for _, c := range []struct {
		gvk schema.GroupVersionKind
		cm  *corev1.ConfigMap
	}{{takeGVK, unclaimed}, {widgetGVK, elsewhere}} {
		u := crtest.WaitCondition(t, k8s, c.gvk, ns, c.cm.Name, "Released", metav1.ConditionFalse, "InstallFailed", timeout)
		if msg := crtest.Condition(u, "Released").Message; !strings.Contains(msg, "exists and cannot be imported") {
			t.Errorf("%s: Released does not say the ConfigMap exists: %s", c.cm.Name, msg)
		}
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(c.cm), &cm); err != nil || cm.UID != c.cm.UID || cm.Data["message"] != "old" ||
			cm.Annotations[records.AnnotationOwner] != "" || cm.Labels["app.kubernetes.io/managed-by"] != "" {
			t.Errorf("%s: the existing ConfigMap changed: %v, data %v, labels %v, annotations %v", c.cm.Name, err, cm.Data, cm.Labels, cm.Annotations)
		}
	}
}
