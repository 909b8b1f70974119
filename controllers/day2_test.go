package controllers_test

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	rstatus "github.com/rudder-operator/rudder/api/status"
	"github.com/rudder-operator/rudder/internal/chartsource/chartsourcetest"
	"github.com/rudder-operator/rudder/internal/crtest"
	"github.com/rudder-operator/rudder/internal/machine"
)

// The day-2 policies of a watch (issue 26), each against the real control plane, on the day2
// chart (a ConfigMap and a Deployment whose selector has the value tier) and on gearChart.

var (
	driftIgnoreGVK = schema.GroupVersionKind{Group: "test.rudder.dev", Version: "v1", Kind: "DriftIgnore"}
	driftWarnGVK   = schema.GroupVersionKind{Group: "test.rudder.dev", Version: "v1", Kind: "DriftWarn"}
	forceProbeGVK  = schema.GroupVersionKind{Group: "test.rudder.dev", Version: "v1", Kind: "ForceProbe"}
	day2ProbeGVK   = schema.GroupVersionKind{Group: "test.rudder.dev", Version: "v1", Kind: "Day2Probe"}
	retryProbeGVK  = schema.GroupVersionKind{Group: "test.rudder.dev", Version: "v1", Kind: "RetryProbe"}
	crdSkipGVK     = schema.GroupVersionKind{Group: "test.rudder.dev", Version: "v1", Kind: "CRDSkip"}
	crdReplaceGVK  = schema.GroupVersionKind{Group: "test.rudder.dev", Version: "v1", Kind: "CRDReplace"}
)

// hpaWrite changes the Deployment name as an HPA (replicas) and a careless person (the app
// container's image) would, with a strategic merge patch of its own field manager.
func hpaWrite(t *testing.T, ns, name string) {
	t.Helper()
	dep := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	body := `{"spec":{"replicas":3,"template":{"spec":{"containers":[{"name":"app","image":"nginx:edited"}]}}}}`
	if err := k8s.Patch(context.Background(), dep, client.RawPatch(types.StrategicMergePatchType, []byte(body)), client.FieldOwner("hpa")); err != nil {
		t.Fatal(err)
	}
}

func deployment(t *testing.T, ns, name string) *appsv1.Deployment {
	t.Helper()
	var dep appsv1.Deployment
	if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, &dep); err != nil {
		t.Fatal(err)
	}
	return &dep
}

// TestDriftIgnore: with /spec/replicas ignored on Deployments, the HPA's replicas stay and
// the edited image is restored.
func TestDriftIgnore(t *testing.T) {
	crtest.NeedsCluster(t)
	t.Parallel()
	ns := crtest.NewNamespace(t, k8s, "drift-ignore-")
	create(t, crtest.NewCR(driftIgnoreGVK, ns, "d", map[string]any{}))
	crtest.WaitCondition(t, k8s, driftIgnoreGVK, ns, "d", rstatus.TypeReady, metav1.ConditionTrue, "", timeout)
	hpaWrite(t, ns, "d")
	crtest.Eventually(t, "the image restored", timeout, func(ctx context.Context) (bool, error) {
		return deployment(t, ns, "d").Spec.Template.Spec.Containers[0].Image == "nginx:1", nil
	})
	// The pass that restored the image left the replicas: they were in the same patch or not.
	if r := *deployment(t, ns, "d").Spec.Replicas; r != 3 {
		t.Fatalf("replicas %d after the drift was restored, want the HPA's 3", r)
	}
	crtest.WaitEvent(t, k8s, ns, "d", rstatus.ReasonDriftCorrected, "Deployment/"+ns+"/d (reverted)")
}

// TestDriftWarn: in warn mode both changes stay, Drifted names both fields, an Event says so,
// and nothing is restored (counted).
func TestDriftWarn(t *testing.T) {
	crtest.NeedsCluster(t)
	ns := crtest.NewNamespace(t, k8s, "drift-warn-")
	create(t, crtest.NewCR(driftWarnGVK, ns, "w", map[string]any{}))
	u := crtest.WaitCondition(t, k8s, driftWarnGVK, ns, "w", rstatus.TypeReady, metav1.ConditionTrue, "", timeout)
	if c := crtest.Condition(u, rstatus.TypeDrifted); c == nil || c.Status != metav1.ConditionFalse {
		t.Fatalf("Drifted after the install: %+v", c)
	}
	corrections := func() float64 {
		return crtest.Metric(t, "rudder_drift_corrections_total", map[string]string{"gvk": "DriftWarn.test.rudder.dev/v1"})
	}
	before := corrections()
	hpaWrite(t, ns, "w")
	u = crtest.WaitCondition(t, k8s, driftWarnGVK, ns, "w", rstatus.TypeDrifted, metav1.ConditionTrue, rstatus.ReasonDriftDetected, timeout)
	msg := crtest.Condition(u, rstatus.TypeDrifted).Message
	for _, want := range []string{"Deployment/" + ns + "/w", "/spec/replicas", "/spec/template/spec/containers/0/image", "not restored"} {
		if !strings.Contains(msg, want) {
			t.Errorf("Drifted does not name %q: %s", want, msg)
		}
	}
	crtest.WaitEvent(t, k8s, ns, "w", rstatus.ReasonDriftDetected, "/spec/replicas")
	dep := deployment(t, ns, "w")
	if *dep.Spec.Replicas != 3 || dep.Spec.Template.Spec.Containers[0].Image != "nginx:edited" {
		t.Fatalf("warn mode restored: replicas %d, image %s", *dep.Spec.Replicas, dep.Spec.Template.Spec.Containers[0].Image)
	}
	if got := corrections() - before; got != 0 {
		t.Fatalf("warn mode counted %v drift corrections", got)
	}
}

// TestImmutableField: an upgrade that changes a Deployment's selector is rolled back without
// upgrade.force, its condition naming the field and the option; with force the Deployment is
// replaced in one new revision, with one Event, and so is a StatefulSet whose
// volumeClaimTemplates change (the API server's other refusal of an update).
func TestImmutableField(t *testing.T) {
	crtest.NeedsCluster(t)
	t.Parallel()
	ns := crtest.NewNamespace(t, k8s, "immutable-")
	create(t, crtest.NewCR(day2ProbeGVK, ns, "day2probe", map[string]any{}))
	create(t, crtest.NewCR(forceProbeGVK, ns, "forceprobe", map[string]any{}))
	create(t, crtest.NewCR(forceProbeGVK, ns, "forcests", map[string]any{"statefulSet": true}))
	crtest.WaitCondition(t, k8s, day2ProbeGVK, ns, "day2probe", rstatus.TypeReady, metav1.ConditionTrue, "", timeout)
	for _, name := range []string{"forceprobe", "forcests"} {
		crtest.WaitCondition(t, k8s, forceProbeGVK, ns, name, rstatus.TypeReady, metav1.ConditionTrue, "", timeout)
	}
	oldUID := deployment(t, ns, "forceprobe").UID
	oldSTS := statefulSet(t, ns, "forcests").UID

	patch(t, day2ProbeGVK, ns, "day2probe", `{"spec":{"tier":"b"}}`)
	u := crtest.WaitCondition(t, k8s, day2ProbeGVK, ns, "day2probe", rstatus.TypeStalled, metav1.ConditionTrue, rstatus.ReasonUpgradeFailed, timeout)
	released := crtest.Condition(u, rstatus.TypeReleased)
	for _, want := range []string{"spec.selector", "field is immutable", "upgrade.force", "rolled back to revision 1"} {
		if !strings.Contains(released.Message, want) {
			t.Errorf("Released (%s) does not say %q: %s", released.Reason, want, released.Message)
		}
	}

	patch(t, forceProbeGVK, ns, "forceprobe", `{"spec":{"tier":"b"}}`)
	patch(t, forceProbeGVK, ns, "forcests", `{"spec":{"storage":"2Gi"}}`)
	for _, name := range []string{"forceprobe", "forcests"} {
		u = crtest.WaitCondition(t, k8s, forceProbeGVK, ns, name, rstatus.TypeReady, metav1.ConditionTrue, "", timeout)
		if rev, _, _ := unstructured.NestedInt64(u.Object, "status", "release", "revision"); rev != 2 {
			t.Fatalf("%s: revision %d after the forced upgrade, want 2", name, rev)
		}
	}
	dep := deployment(t, ns, "forceprobe")
	if dep.UID == oldUID || dep.Spec.Selector.MatchLabels["tier"] != "b" {
		t.Fatalf("Deployment not replaced: uid %s (was %s), selector %v", dep.UID, oldUID, dep.Spec.Selector.MatchLabels)
	}
	sts := statefulSet(t, ns, "forcests")
	if got := sts.Spec.VolumeClaimTemplates[0].Spec.Resources.Requests.Storage().String(); sts.UID == oldSTS || got != "2Gi" {
		t.Fatalf("StatefulSet not replaced: uid %s (was %s), storage %s", sts.UID, oldSTS, got)
	}
	// One Event per object replaced: the objects whose update needed no replacing (the
	// ConfigMaps, forcests's Deployment) have none.
	for name, obj := range map[string]string{"forceprobe": "Deployment/" + ns + "/forceprobe", "forcests": "StatefulSet/" + ns + "/forcests"} {
		crtest.WaitEvent(t, k8s, ns, name, rstatus.ReasonReplaced, obj, "immutable")
		if n := replacedEvents(t, ns, name); n != 1 {
			t.Fatalf("%s: %d Replaced events, want 1", name, n)
		}
	}
}

// TestForceNeverDeletesWhatCannotBeCreated: with the namespace at its quota of Deployments,
// the API server would refuse the Deployment as a new object, so upgrade.force does not
// delete it: the upgrade fails and is rolled back, the Deployment stays, and the condition
// says why.
func TestForceNeverDeletesWhatCannotBeCreated(t *testing.T) {
	crtest.NeedsCluster(t)
	t.Parallel()
	ns := crtest.NewNamespace(t, k8s, "force-quota-")
	create(t, crtest.NewCR(forceProbeGVK, ns, "fq", map[string]any{}))
	crtest.WaitCondition(t, k8s, forceProbeGVK, ns, "fq", rstatus.TypeReady, metav1.ConditionTrue, "", timeout)
	before := deployment(t, ns, "fq")
	probe := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "quota-probe"}, Spec: *before.Spec.DeepCopy()}
	crtest.Quota(t, k8s, ns, corev1.ResourceList{"count/deployments.apps": resource.MustParse("1")}, probe)

	patch(t, forceProbeGVK, ns, "fq", `{"spec":{"tier":"b"}}`)
	u := crtest.WaitCondition(t, k8s, forceProbeGVK, ns, "fq", rstatus.TypeStalled, metav1.ConditionTrue, rstatus.ReasonUpgradeFailed, timeout)
	msg := crtest.Condition(u, rstatus.TypeReleased).Message
	for _, want := range []string{"not replacing Deployment/" + ns + "/fq", "exceeded quota", "rolled back to revision 1"} {
		if !strings.Contains(msg, want) {
			t.Errorf("Released does not say %q: %s", want, msg)
		}
	}
	if after := deployment(t, ns, "fq"); after.UID != before.UID {
		t.Fatalf("the Deployment was deleted (uid %s, was %s)", after.UID, before.UID)
	}
	if n := replacedEvents(t, ns, "fq"); n != 0 {
		t.Fatalf("%d Replaced events", n)
	}
}

// TestForcedUpgradeRolledBack: a forced upgrade replaces the Deployment, then fails on
// another object; its rollback replaces the Deployment back (its selector is immutable both
// ways), with an Event, so the release returns to revision 1's objects.
func TestForcedUpgradeRolledBack(t *testing.T) {
	crtest.NeedsCluster(t)
	t.Parallel()
	ns := crtest.NewNamespace(t, k8s, "force-rollback-")
	create(t, crtest.NewCR(forceProbeGVK, ns, "fr", map[string]any{}))
	crtest.WaitCondition(t, k8s, forceProbeGVK, ns, "fr", rstatus.TypeReady, metav1.ConditionTrue, "", timeout)
	first := deployment(t, ns, "fr").UID

	patch(t, forceProbeGVK, ns, "fr", `{"spec":{"tier":"b","badKey":"bad key"}}`)
	u := crtest.WaitCondition(t, k8s, forceProbeGVK, ns, "fr", rstatus.TypeStalled, metav1.ConditionTrue, rstatus.ReasonUpgradeFailed, timeout)
	if c := crtest.Condition(u, rstatus.TypeReleased); c.Reason != rstatus.ReasonRolledBack || !strings.Contains(c.Message, "bad key") {
		t.Fatalf("Released %s: %s", c.Reason, c.Message)
	}
	dep := deployment(t, ns, "fr")
	if dep.Spec.Selector.MatchLabels["tier"] != "a" || dep.UID == first {
		t.Fatalf("Deployment after the rollback: selector %v, uid %s (first %s): want revision 1's selector, replaced back",
			dep.Spec.Selector.MatchLabels, dep.UID, first)
	}
	crtest.WaitEvent(t, k8s, ns, "fr", rstatus.ReasonReplaced, "Deployment/"+ns+"/fr", "in the rollback to revision 1")
}

func statefulSet(t *testing.T, ns, name string) *appsv1.StatefulSet {
	t.Helper()
	var sts appsv1.StatefulSet
	if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, &sts); err != nil {
		t.Fatal(err)
	}
	return &sts
}

// replacedEvents counts the Replaced Events of the CR name.
func replacedEvents(t *testing.T, ns, name string) int {
	t.Helper()
	return crtest.CountEvents(t, k8s, ns, name, rstatus.ReasonReplaced)
}

func installs(t *testing.T, kind, result string) float64 {
	return crtest.Metric(t, "rudder_release_actions_total", map[string]string{"gvk": kind + ".test.rudder.dev/v1", "action": "install", "result": result})
}

// TestRetries: an install a ResourceQuota refuses (admission's 403, not RBAC's) fails twice,
// then works once the quota is lifted: remediation.retries 3 gets it Ready, with at most 3
// revisions; without retries it is held back and not tried again.
func TestRetries(t *testing.T) {
	crtest.NeedsCluster(t)
	ctx := context.Background()
	ns := crtest.NewNamespace(t, k8s, "retries-")
	failedBefore := installs(t, "RetryProbe", "failed")
	q := crtest.NoConfigMaps(t, k8s, ns)
	create(t, crtest.NewCR(retryProbeGVK, ns, "r", map[string]any{}))
	crtest.Eventually(t, "two failed installs", timeout, func(ctx context.Context) (bool, error) {
		u, err := crtest.Get(ctx, k8s, retryProbeGVK, ns, "r")
		return err == nil && crtest.Failures(u) >= 2, err
	})
	u, err := crtest.Get(ctx, k8s, retryProbeGVK, ns, "r")
	if err != nil {
		t.Fatal(err)
	}
	if c := crtest.Condition(u, rstatus.TypeStalled); c == nil || c.Status != metav1.ConditionFalse {
		t.Fatalf("Stalled while retries are left: %+v", c)
	}
	// "exceeded quota", or "status unknown for quota" before the quota controller counted.
	if c := crtest.Condition(u, rstatus.TypeReleased); c == nil || c.Reason != rstatus.ReasonInstallFailed || !strings.Contains(c.Message, "quota") {
		t.Fatalf("Released while retrying: %+v", c)
	}
	if err := k8s.Delete(ctx, q); err != nil {
		t.Fatal(err)
	}
	u = crtest.WaitCondition(t, k8s, retryProbeGVK, ns, "r", rstatus.TypeReady, metav1.ConditionTrue, "", timeout)
	if rev, _, _ := unstructured.NestedInt64(u.Object, "status", "release", "revision"); rev < 1 || rev > 3 {
		t.Fatalf("revision %d, want at most 3", rev)
	}
	if n := installs(t, "RetryProbe", "failed") - failedBefore; n < 2 || n > 3 {
		t.Fatalf("%v failed installs before the quota was lifted, want 2 or 3", n)
	}
	if failed, ok, _ := unstructured.NestedMap(u.Object, "status", "release", "failed"); ok {
		t.Fatalf("status.release.failed kept after the install: %v", failed)
	}

	// retries 0: held back on the first failure, and not tried again by a later pass.
	q = crtest.NoConfigMaps(t, k8s, ns)
	create(t, crtest.NewCR(day2ProbeGVK, ns, "z", map[string]any{}))
	u = crtest.WaitCondition(t, k8s, day2ProbeGVK, ns, "z", rstatus.TypeStalled, metav1.ConditionTrue, rstatus.ReasonInstallFailed, timeout)
	if crtest.Failures(u) != 1 {
		t.Fatalf("failures %d, want 1", crtest.Failures(u))
	}
	before, okBefore := installs(t, "Day2Probe", "failed"), installs(t, "Day2Probe", "ok")
	if err := k8s.Delete(ctx, q); err != nil {
		t.Fatal(err)
	}
	patch(t, day2ProbeGVK, ns, "z", `{"metadata":{"annotations":{"`+machine.AnnotationRollbackTo+`":"99"}}}`)
	crtest.WaitCondition(t, k8s, day2ProbeGVK, ns, "z", rstatus.TypeRollbackRequest, metav1.ConditionFalse, rstatus.ReasonRollbackRejected, timeout)
	if got := installs(t, "Day2Probe", "failed") - before; got != 0 || installs(t, "Day2Probe", "ok") != okBefore {
		t.Fatalf("a held-back install was tried again (%v more failures)", got)
	}
}

// gearChart is the chart of crds/ tests at version v: crds/ has the Gear CRD of the group
// <vol>.day2.rudder.dev — v1 stored (1); v1 stored and v2 served (2); v2 alone (3).
func gearChart(vol string, v int) map[string]string {
	versions := map[int][]string{1: {"v1"}, 2: {"v1", "v2"}, 3: {"v2"}}[v]
	var vs strings.Builder
	for _, name := range versions {
		storage := name == "v1" || v == 3
		fmt.Fprintf(&vs, "  - name: %s\n    served: true\n    storage: %v\n    schema: {openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}}\n", name, storage)
	}
	group := vol + ".day2.rudder.dev"
	return map[string]string{
		"Chart.yaml":  fmt.Sprintf("apiVersion: v2\nname: gears\nversion: 0.%d.0\n", v),
		"values.yaml": "{}\n",
		"crds/gear.yaml": fmt.Sprintf("apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata:\n  name: gears.%s\nspec:\n  group: %s\n  names: {kind: Gear, listKind: GearList, plural: gears, singular: gear}\n  scope: Namespaced\n  versions:\n%s",
			group, group, vs.String()),
		"templates/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}\n",
	}
}

// publishGears publishes gearChart(vol, v) in the volume vol, and waits until the chart source
// has loaded it.
func publishGears(t *testing.T, vol string, v int) {
	t.Helper()
	path := filepath.Join(chartDir, vol)
	if err := chartsourcetest.PublishAtomic(path, gearChart(vol, v)); err != nil {
		t.Fatal(err)
	}
	crtest.Eventually(t, fmt.Sprintf("the chart source to load %s at version %d", vol, v), timeout, func(context.Context) (bool, error) {
		st, _ := charts.Get(path)
		return st.Current != nil && st.Current.Chart.Metadata.Version == fmt.Sprintf("0.%d.0", v), nil
	})
}

// crdObject is the CustomResourceDefinition name, as unstructured (the client's scheme does
// not have the type).
func crdObject(name string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(schema.GroupVersionKind{Group: "apiextensions.k8s.io", Version: "v1", Kind: "CustomResourceDefinition"})
	u.SetName(name)
	return u
}

func servedVersions(t *testing.T, name string) []string {
	t.Helper()
	crd := crdObject(name)
	if err := k8s.Get(context.Background(), client.ObjectKeyFromObject(crd), crd); err != nil {
		t.Fatal(err)
	}
	versions, _, _ := unstructured.NestedSlice(crd.Object, "spec", "versions")
	var out []string
	for _, v := range versions {
		out = append(out, v.(map[string]any)["name"].(string))
	}
	return out
}

// waitReadyAt waits until a CR of gvk is Ready on revision rev.
func waitReadyAt(t *testing.T, gvk schema.GroupVersionKind, ns, name string, rev int64) {
	t.Helper()
	crtest.Eventually(t, fmt.Sprintf("%s %s/%s Ready at revision %d", gvk.Kind, ns, name, rev), timeout, func(ctx context.Context) (bool, error) {
		u, err := crtest.Get(ctx, k8s, gvk, ns, name)
		if err != nil {
			return false, err
		}
		got, _, _ := unstructured.NestedInt64(u.Object, "status", "release", "revision")
		c := crtest.Condition(u, rstatus.TypeReady)
		return got == rev && c != nil && c.Status == metav1.ConditionTrue, nil
	})
}

// TestCRDPolicies: the chart's next version adds a served version to its CRD. crds.upgrade
// Skip (Helm's default) keeps the CRD as installed; CreateReplace replaces it; a version that
// drops the stored v1 is refused, naming it.
func TestCRDPolicies(t *testing.T) {
	crtest.NeedsCluster(t)
	ctx := context.Background()
	// From the chart's first version and no CRD: a run before this one (go test -count) left
	// its CRs, which would apply the chart's CRDs again, the CRDs and the chart's last version.
	for _, gvk := range []schema.GroupVersionKind{crdSkipGVK, crdReplaceGVK} {
		list := &unstructured.UnstructuredList{}
		list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
		if err := k8s.List(ctx, list); err != nil {
			t.Fatal(err)
		}
		for _, cr := range list.Items {
			if err := k8s.Delete(ctx, &cr); client.IgnoreNotFound(err) != nil {
				t.Fatal(err)
			}
			crtest.Eventually(t, gvk.Kind+" "+cr.GetName()+" gone", timeout, func(ctx context.Context) (bool, error) {
				_, err := crtest.Get(ctx, k8s, gvk, cr.GetNamespace(), cr.GetName())
				return apierrors.IsNotFound(err), client.IgnoreNotFound(err)
			})
		}
	}
	for _, vol := range []string{"crdskip", "crdreplace"} {
		publishGears(t, vol, 1)
		crd := crdObject("gears." + vol + ".day2.rudder.dev")
		if err := k8s.Delete(ctx, crd); client.IgnoreNotFound(err) != nil {
			t.Fatal(err)
		}
		crtest.Eventually(t, "CRD "+crd.GetName()+" gone", timeout, func(ctx context.Context) (bool, error) {
			err := k8s.Get(ctx, client.ObjectKeyFromObject(crd), crdObject(crd.GetName()))
			return apierrors.IsNotFound(err), client.IgnoreNotFound(err)
		})
	}
	ns := crtest.NewNamespace(t, k8s, "crds-")
	create(t, crtest.NewCR(crdSkipGVK, ns, "s", map[string]any{}))
	create(t, crtest.NewCR(crdReplaceGVK, ns, "r", map[string]any{}))
	waitReadyAt(t, crdSkipGVK, ns, "s", 1)
	waitReadyAt(t, crdReplaceGVK, ns, "r", 1)
	for _, crd := range []string{"gears.crdskip.day2.rudder.dev", "gears.crdreplace.day2.rudder.dev"} {
		if got := servedVersions(t, crd); !slices.Equal(got, []string{"v1"}) {
			t.Fatalf("%s installed with versions %v", crd, got)
		}
	}
	// A Gear stored as v1.
	gear := &unstructured.Unstructured{}
	gear.SetGroupVersionKind(schema.GroupVersionKind{Group: "crdreplace.day2.rudder.dev", Version: "v1", Kind: "Gear"})
	gear.SetNamespace(ns)
	gear.SetName("g")
	create(t, gear)

	for _, vol := range []string{"crdskip", "crdreplace"} {
		publishGears(t, vol, 2)
	}
	waitReadyAt(t, crdSkipGVK, ns, "s", 2)
	waitReadyAt(t, crdReplaceGVK, ns, "r", 2)
	if got := servedVersions(t, "gears.crdskip.day2.rudder.dev"); !slices.Equal(got, []string{"v1"}) {
		t.Fatalf("crds.upgrade Skip changed the CRD: versions %v", got)
	}
	if got := servedVersions(t, "gears.crdreplace.day2.rudder.dev"); !slices.Equal(got, []string{"v1", "v2"}) {
		t.Fatalf("crds.upgrade CreateReplace: versions %v, want v1 and v2", got)
	}
	crtest.WaitEvent(t, k8s, ns, "r", rstatus.ReasonCRDsApplied, "replaced gears.crdreplace.day2.rudder.dev")

	publishGears(t, "crdreplace", 3)
	u := crtest.WaitCondition(t, k8s, crdReplaceGVK, ns, "r", rstatus.TypeStalled, metav1.ConditionTrue, rstatus.ReasonUpgradeFailed, timeout)
	if msg := crtest.Condition(u, rstatus.TypeReleased).Message; !strings.Contains(msg, "remove version v1") || !strings.Contains(msg, "storedVersions") {
		t.Fatalf("Released does not name the stored version: %s", msg)
	}
	if got := servedVersions(t, "gears.crdreplace.day2.rudder.dev"); !slices.Equal(got, []string{"v1", "v2"}) {
		t.Fatalf("the refused CRD changed: versions %v", got)
	}
}
