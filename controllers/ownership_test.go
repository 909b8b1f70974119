package controllers_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rudder-operator/rudder/internal/crtest"
	"github.com/rudder-operator/rudder/internal/helm/helmtest"
	"github.com/rudder-operator/rudder/internal/records"
)

// The kinds of the ownership-and-bounds tests: each is the tenantbox chart (extraObjects
// through tpl, a count fed to until, a migration hook Pod from values), as a CR author would
// attack it.
var (
	tenantBoxGVK = schema.GroupVersionKind{Group: "test.rudder.dev", Version: "v1", Kind: "TenantBox"}
	wedgeBoxGVK  = schema.GroupVersionKind{Group: "test.rudder.dev", Version: "v1", Kind: "WedgeBox"}
	roleBoxGVK   = schema.GroupVersionKind{Group: "test.rudder.dev", Version: "v1", Kind: "RoleBox"}
)

// victimSecret creates a Secret that no release made, and returns a check that it is as it
// was (same UID, same content).
func victimSecret(t *testing.T, ns, name string) func() {
	t.Helper()
	ctx := context.Background()
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, StringData: map[string]string{"password": "victim"}}
	if err := k8s.Create(ctx, s); err != nil {
		t.Fatal(err)
	}
	return func() {
		t.Helper()
		var got corev1.Secret
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(s), &got); err != nil {
			t.Fatalf("the victim Secret %s is gone: %v", name, err)
		}
		if got.UID != s.UID || string(got.Data["password"]) != "victim" {
			t.Fatalf("the victim Secret %s was replaced or changed: uid %s (was %s), data %q", name, got.UID, s.UID, got.Data)
		}
	}
}

// absent fails the test unless the API server has no object of obj's type at key.
func absent(t *testing.T, key client.ObjectKey, obj client.Object) {
	t.Helper()
	if err := k8s.Get(context.Background(), key, obj); !apierrors.IsNotFound(err) {
		t.Fatalf("%T %s exists (err=%v)", obj, key, err)
	}
}

// otherTenantIsServed creates a CR of gvk in a namespace of its own and waits for it to be
// Ready within within.
func otherTenantIsServed(t *testing.T, gvk schema.GroupVersionKind, within time.Duration) {
	t.Helper()
	ns := crtest.NewNamespace(t, k8s, "t-")
	if err := k8s.Create(context.Background(), crtest.NewCR(gvk, ns, "bystander", map[string]any{})); err != nil {
		t.Fatal(err)
	}
	crtest.WaitCondition(t, k8s, gvk, ns, "bystander", "Ready", metav1.ConditionTrue, "", within)
}

// TestHookTakeoverIsRefused: an extraObjects entry annotated as a pre-install hook, named like
// a Secret someone else made, would be deleted and replaced by Helm's before-hook-creation
// policy. It is refused before the first write, naming the object and the rule.
func TestHookTakeoverIsRefused(t *testing.T) {
	t.Parallel()
	ns := crtest.NewNamespace(t, k8s, "t-")
	unchanged := victimSecret(t, ns, "shared-creds")
	spec := map[string]any{"extraObjects": []any{map[string]any{
		"apiVersion": "v1", "kind": "Secret",
		"metadata":   map[string]any{"name": "shared-creds", "annotations": map[string]any{"helm.sh/hook": "pre-install"}},
		"stringData": map[string]any{"password": "attacker"},
	}}}
	if err := k8s.Create(context.Background(), crtest.NewCR(tenantBoxGVK, ns, "takeover", spec)); err != nil {
		t.Fatal(err)
	}
	stalledOn(t, tenantBoxGVK, ns, "takeover", `hook Secret "shared-creds"`, "not made by this release")
	unchanged()
	otherTenantIsServed(t, tenantBoxGVK, 30*time.Second)
}

// TestKeptHooksAreTheReleases: a hook without a delete policy (kept after it ran) carries
// rudder's marks, is recreated by each upgrade (its own, so before-hook-creation may delete
// it), and goes with the CR.
func TestKeptHooksAreTheReleases(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ns := crtest.NewNamespace(t, k8s, "t-")
	hook := func(gen string) map[string]any {
		return map[string]any{"extraObjects": []any{map[string]any{
			"apiVersion": "v1", "kind": "ConfigMap",
			"metadata": map[string]any{"name": "{{ .Release.Name }}-migrated", "annotations": map[string]any{"helm.sh/hook": "pre-install,pre-upgrade"}},
			"data":     map[string]any{"generation": gen},
		}}}
	}
	cr := crtest.NewCR(tenantBoxGVK, ns, "keeper", hook("1"))
	if err := k8s.Create(ctx, cr); err != nil {
		t.Fatal(err)
	}
	crtest.WaitCondition(t, k8s, tenantBoxGVK, ns, "keeper", "Ready", metav1.ConditionTrue, "", timeout)
	var first corev1.ConfigMap
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "keeper-migrated"}, &first); err != nil {
		t.Fatal(err)
	}
	if first.Labels[records.LabelManaged] != "true" || first.Annotations[records.AnnotationOwner] != "test.rudder.dev/TenantBox/"+ns+"/keeper" ||
		len(first.OwnerReferences) != 1 || first.OwnerReferences[0].Name != "keeper" {
		t.Fatalf("the kept hook lacks rudder's marks: labels %v, annotations %v, owners %v", first.Labels, first.Annotations, first.OwnerReferences)
	}

	crtest.Update(t, k8s, tenantBoxGVK, ns, "keeper", func(u *unstructured.Unstructured) { u.Object["spec"] = hook("2") })
	crtest.Eventually(t, "the upgrade to recreate the kept hook", timeout, func(ctx context.Context) (bool, error) {
		var cm corev1.ConfigMap
		err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "keeper-migrated"}, &cm)
		return err == nil && cm.UID != first.UID && cm.Data["generation"] == "2", err
	})
	crtest.WaitCondition(t, k8s, tenantBoxGVK, ns, "keeper", "Ready", metav1.ConditionTrue, "", timeout)
	if h := helmtest.History(t, cluster.Kubeconfig, ns, "keeper"); len(h) != 2 {
		t.Fatalf("want 2 revisions, have %s", describe(h))
	}

	if err := k8s.Delete(ctx, crtest.NewCR(tenantBoxGVK, ns, "keeper", nil)); err != nil {
		t.Fatal(err)
	}
	crtest.Eventually(t, "the kept hook to go with its CR", timeout, func(ctx context.Context) (bool, error) {
		err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "keeper-migrated"}, &corev1.ConfigMap{})
		return apierrors.IsNotFound(err), client.IgnoreNotFound(err)
	})
}

// TestForgedReleaseRecordIsRefused: values that render a Secret shaped like a Helm release
// record (a newer revision of the CR's own release, "uninstalling", naming others' objects) are
// refused at render, and nothing the forged manifest names is touched.
func TestForgedReleaseRecordIsRefused(t *testing.T) {
	t.Parallel()
	ns := crtest.NewNamespace(t, k8s, "t-")
	unchanged := victimSecret(t, ns, "victim")
	spec := map[string]any{"extraObjects": []any{map[string]any{
		"apiVersion": "v1", "kind": "Secret", "type": "helm.sh/release.v1",
		"metadata": map[string]any{"name": "sh.helm.release.v1.forger.v99", "labels": map[string]any{
			"owner": "helm", "name": "forger", "status": "uninstalling", "version": "99"}},
		"stringData": map[string]any{"release": "forged"},
	}}}
	if err := k8s.Create(context.Background(), crtest.NewCR(tenantBoxGVK, ns, "forger", spec)); err != nil {
		t.Fatal(err)
	}
	stalledOn(t, tenantBoxGVK, ns, "forger", `Secret "sh.helm.release.v1.forger.v99"`, "shaped like a Helm release record")
	unchanged()
	absent(t, client.ObjectKey{Namespace: ns, Name: "sh.helm.release.v1.forger.v99"}, &corev1.Secret{})
	otherTenantIsServed(t, tenantBoxGVK, 30*time.Second)
}

// TestCountBombIsBounded: a count from values fed to until is refused past the watch's
// maxObjects before anything is created; a chart of 300 objects is served.
func TestCountBombIsBounded(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ns := crtest.NewNamespace(t, k8s, "t-")
	if err := k8s.Create(ctx, crtest.NewCR(tenantBoxGVK, ns, "bomb", map[string]any{"replicaCount": 3000, "perReplicaService": true})); err != nil {
		t.Fatal(err)
	}
	stalledOn(t, tenantBoxGVK, ns, "bomb", "maxObjects is 1000")
	var svcs corev1.ServiceList
	if err := k8s.List(ctx, &svcs, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	if len(svcs.Items) != 0 {
		t.Fatalf("%d Services were created by a refused release", len(svcs.Items))
	}
	otherTenantIsServed(t, tenantBoxGVK, 30*time.Second)

	if err := k8s.Create(ctx, crtest.NewCR(tenantBoxGVK, ns, "big", map[string]any{"replicaCount": 299, "perReplicaService": true})); err != nil {
		t.Fatal(err)
	}
	// Ready takes 299 Services and a Deployment's 299 Pods (kube-controller-manager and kwok
	// make them) beside the package's other parallel tests: on a busy 2-core machine, past
	// two minutes.
	crtest.WaitCondition(t, k8s, tenantBoxGVK, ns, "big", "Ready", metav1.ConditionTrue, "", 4*timeout)
	if err := k8s.List(ctx, &svcs, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	if len(svcs.Items) != 299 {
		t.Fatalf("a 300-object release made %d Services, want 299", len(svcs.Items))
	}
}

// TestWedgedHooksHoldNoOtherTenant: CRs whose pre-install hook Pod can never finish (a
// nodeSelector from values that no node matches) wait in their actions. They hold neither the
// kind's workers from another namespace's CR, nor their own deletion.
func TestWedgedHooksHoldNoOtherTenant(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ns := crtest.NewNamespace(t, k8s, "t-")
	const wedged = 6 // more than the kind's 4 workers
	for i := range wedged {
		spec := map[string]any{"migration": map[string]any{"enabled": true, "nodeSelector": map[string]any{"pool": "nowhere"}}}
		if err := k8s.Create(ctx, crtest.NewCR(wedgeBoxGVK, ns, fmt.Sprintf("wedge-%d", i), spec)); err != nil {
			t.Fatal(err)
		}
	}
	// Four hook Pods (the namespace's share of action slots) wait for a node.
	crtest.Eventually(t, "the wedged hook Pods", timeout, func(ctx context.Context) (bool, error) {
		var pods corev1.PodList
		err := k8s.List(ctx, &pods, client.InNamespace(ns))
		return len(pods.Items) >= 4, err
	})
	crtest.WaitCondition(t, k8s, wedgeBoxGVK, ns, "wedge-5", "Reconciling", metav1.ConditionTrue, "", timeout)

	otherTenantIsServed(t, wedgeBoxGVK, 30*time.Second)

	// A wedged CR is deleted at once: its action is cancelled, its release uninstalled.
	for i := range wedged {
		if err := k8s.Delete(ctx, crtest.NewCR(wedgeBoxGVK, ns, fmt.Sprintf("wedge-%d", i), nil)); err != nil {
			t.Fatal(err)
		}
	}
	crtest.Eventually(t, "the wedged CRs to be deleted", 60*time.Second, func(ctx context.Context) (bool, error) {
		for i := range wedged {
			if _, err := crtest.Get(ctx, k8s, wedgeBoxGVK, ns, fmt.Sprintf("wedge-%d", i)); !apierrors.IsNotFound(err) {
				return false, err
			}
		}
		return true, nil
	})
}

// TestCaseFoldedKeysAreRefused: a hook whose metadata says "nameſpace" (which the API server
// ignores, and a case-insensitive reader takes for namespace) is refused before any write.
func TestCaseFoldedKeysAreRefused(t *testing.T) {
	t.Parallel()
	ns, victim := crtest.NewNamespace(t, k8s, "t-"), crtest.NewNamespace(t, k8s, "t-")
	spec := map[string]any{"extraObjects": []any{map[string]any{
		"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": "folded", "namespace": victim, "nameſpace": ns,
			"annotations": map[string]any{"helm.sh/hook": "pre-install"}},
	}}}
	if err := k8s.Create(context.Background(), crtest.NewCR(tenantBoxGVK, ns, "folded", spec)); err != nil {
		t.Fatal(err)
	}
	stalledOn(t, tenantBoxGVK, ns, "folded", `"nameſpace"`, "Unicode case folding")
	noConfigMaps(t, victim)
	otherTenantIsServed(t, tenantBoxGVK, 30*time.Second)
}

// TestAggregationLabelsAreRefused: an allowed ClusterRole that carries an aggregation label
// (adding its rules to roles others hold) is refused unless the watch names the label.
func TestAggregationLabelsAreRefused(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ns := crtest.NewNamespace(t, k8s, "t-")
	name := "rudder-test-aggregated-" + ns
	spec := map[string]any{"extraObjects": []any{map[string]any{
		"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
		"metadata": map[string]any{"name": name, "labels": map[string]any{"rbac.authorization.k8s.io/aggregate-to-view": "true"}},
		"rules":    []any{map[string]any{"apiGroups": []any{""}, "resources": []any{"secrets"}, "verbs": []any{"get"}}},
	}}}
	if err := k8s.Create(ctx, crtest.NewCR(roleBoxGVK, ns, "agg", spec)); err != nil {
		t.Fatal(err)
	}
	stalledOn(t, roleBoxGVK, ns, "agg", `ClusterRole "`+name+`"`, "rbac.authorization.k8s.io/aggregate-to-view")
	absent(t, client.ObjectKey{Name: name}, &rbacv1.ClusterRole{})
	otherTenantIsServed(t, roleBoxGVK, 30*time.Second)
}

// TestRenderThatRecursesIsBounded: a value fed to tpl that calls tpl on itself used to kill the
// process (a goroutine stack overflow is fatal); the render runs in a worker, which is stopped
// at its bound, and the CR says so. A count fed to until stops at the memory bound alike.
func TestRenderThatRecursesIsBounded(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ns := crtest.NewNamespace(t, k8s, "t-")
	if err := k8s.Create(ctx, crtest.NewCR(tenantBoxGVK, ns, "recurse", map[string]any{"extraManifest": "{{ tpl .Values.extraManifest . }}"})); err != nil {
		t.Fatal(err)
	}
	stalledOn(t, tenantBoxGVK, ns, "recurse", "renderMemory is 268435456", "stopped")
	if err := k8s.Create(ctx, crtest.NewCR(tenantBoxGVK, ns, "alloc", map[string]any{"replicaCount": 300000000, "perReplicaService": true})); err != nil {
		t.Fatal(err)
	}
	stalledOn(t, tenantBoxGVK, ns, "alloc", "renderMemory is 268435456")
	otherTenantIsServed(t, tenantBoxGVK, 30*time.Second)
}

// TestNonStringLabelIsRefused: a label whose value renders as a number is refused naming the
// object and the key, as the API server and Helm's install refuse it, instead of the object
// being applied with its labels dropped.
func TestNonStringLabelIsRefused(t *testing.T) {
	t.Parallel()
	ns := crtest.NewNamespace(t, k8s, "t-")
	spec := map[string]any{"extraObjects": []any{map[string]any{
		"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": "numbered", "labels": map[string]any{"app": "x", "version": 2}},
	}}}
	if err := k8s.Create(context.Background(), crtest.NewCR(tenantBoxGVK, ns, "numbered", spec)); err != nil {
		t.Fatal(err)
	}
	stalledOn(t, tenantBoxGVK, ns, "numbered", `ConfigMap "numbered"`, "metadata.labels.version is a number 2")
	noConfigMaps(t, ns)
}
