package controllers_test

import (
	"context"
	"encoding/base64"
	"fmt"
	"maps"
	"strings"
	"testing"

	"helm.sh/helm/v4/pkg/release/common"
	release "helm.sh/helm/v4/pkg/release/v1"
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

// The kinds of the confinement tests (controllers/testdata/charts): each chart tries one way
// out of the CR's namespace, and works when it stays inside.
var (
	hookProbeGVK   = schema.GroupVersionKind{Group: "test.rudder.dev", Version: "v1", Kind: "HookProbe"}
	crdProbeGVK    = schema.GroupVersionKind{Group: "test.rudder.dev", Version: "v1", Kind: "CRDProbe"}
	crdAllowedGVK  = schema.GroupVersionKind{Group: "test.rudder.dev", Version: "v1", Kind: "CRDAllowed"}
	lookupProbeGVK = schema.GroupVersionKind{Group: "test.rudder.dev", Version: "v1", Kind: "LookupProbe"}
	tenantAppGVK   = schema.GroupVersionKind{Group: "test.rudder.dev", Version: "v1", Kind: "TenantApp"}
)

// stalledOn waits for Stalled=True/ChartInvalid and checks that the condition and an Event
// name every part of the violation.
func stalledOn(t *testing.T, gvk schema.GroupVersionKind, ns, name string, parts ...string) {
	t.Helper()
	u := crtest.WaitCondition(t, k8s, gvk, ns, name, "Stalled", metav1.ConditionTrue, "ChartInvalid", timeout)
	msg := crtest.Condition(u, "Stalled").Message
	for _, p := range parts {
		if !strings.Contains(msg, p) {
			t.Errorf("Stalled does not name %q: %s", p, msg)
		}
	}
	crtest.WaitEvent(t, k8s, ns, name, "ChartInvalid", parts...)
	if h := helmtest.History(t, cluster.Kubeconfig, ns, name); len(h) != 0 {
		t.Errorf("a refused release must store no revision: %s", describe(h))
	}
}

func noConfigMaps(t *testing.T, ns string) {
	t.Helper()
	var list corev1.ConfigMapList
	if err := k8s.List(context.Background(), &list, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	for _, cm := range list.Items {
		if cm.Name != "kube-root-ca.crt" {
			t.Errorf("ConfigMap %s/%s was created", ns, cm.Name)
		}
	}
}

func TestHookOutsideTheNamespaceIsRefused(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ns, victim := crtest.NewNamespace(t, k8s, "t-"), crtest.NewNamespace(t, k8s, "t-")
	if err := k8s.Create(ctx, crtest.NewCR(hookProbeGVK, ns, "h", map[string]any{"target": victim})); err != nil {
		t.Fatal(err)
	}
	stalledOn(t, hookProbeGVK, ns, "h", `hook (pre-install,pre-upgrade) ConfigMap "h-hook" in namespace "`+victim+`"`)
	noConfigMaps(t, victim)
	noConfigMaps(t, ns)

	// The same chart with its hook at home: the hook runs.
	if err := k8s.Create(ctx, crtest.NewCR(hookProbeGVK, ns, "home", map[string]any{})); err != nil {
		t.Fatal(err)
	}
	crtest.WaitCondition(t, k8s, hookProbeGVK, ns, "home", "Ready", metav1.ConditionTrue, "", timeout)
	var cm corev1.ConfigMap
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "home-hook"}, &cm); err != nil || cm.Data["ran"] != "yes" {
		t.Fatalf("the pre-install hook in the CR's namespace did not run: %v %v", err, cm.Data)
	}
}

func TestLookupOutsideTheNamespaceIsRefused(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ns, victim := crtest.NewNamespace(t, k8s, "t-"), crtest.NewNamespace(t, k8s, "t-")
	for _, s := range []*corev1.Secret{
		{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "source"}, StringData: map[string]string{"password": "in-" + ns}},
		{ObjectMeta: metav1.ObjectMeta{Namespace: victim, Name: "source"}, StringData: map[string]string{"password": "in-" + victim}},
		{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "other"}, StringData: map[string]string{"password": "other-" + ns}},
	} {
		if err := k8s.Create(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	if err := k8s.Create(ctx, crtest.NewCR(lookupProbeGVK, ns, "steal", map[string]any{"from": map[string]any{"namespace": victim, "name": "source"}})); err != nil {
		t.Fatal(err)
	}
	stalledOn(t, lookupProbeGVK, ns, "steal", `get Secret "source" in namespace "`+victim+`"`)
	noConfigMaps(t, ns)

	// A lookup of the own namespace reads what the watch's allowReads names (Secret/source);
	// one that finds nothing gives an empty map, and so does one of a Secret the release did
	// not make and the watch does not name (with an Event that says so).
	for name, from := range map[string]string{"own": "source", "none": "missing", "withheld": "other"} {
		if err := k8s.Create(ctx, crtest.NewCR(lookupProbeGVK, ns, name, map[string]any{"from": map[string]any{"name": from}})); err != nil {
			t.Fatal(err)
		}
	}
	crtest.WaitEvent(t, k8s, ns, "withheld", "LookupWithheld", "Secret "+ns+"/other")
	for name, want := range map[string]string{"own": `"password":"` + b64("in-"+ns) + `"`, "none": "{}", "withheld": "{}"} {
		crtest.WaitCondition(t, k8s, lookupProbeGVK, ns, name, "Ready", metav1.ConditionTrue, "", timeout)
		var cm corev1.ConfigMap
		if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &cm); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(cm.Data["copied"], want) {
			t.Errorf("%s copied %q, want it to contain %q", name, cm.Data["copied"], want)
		}
	}
}

// TestCRDsOnlyWhereAllowed: a chart's crds/ are installed only where the watch allows
// CustomResourceDefinition; elsewhere the CR stalls naming the CRD. A chart whose hook escapes
// creates no CRD either, even where CRDs are allowed.
func TestCRDsOnlyWhereAllowed(t *testing.T) {
	ctx := context.Background()
	ns, victim := crtest.NewNamespace(t, k8s, "t-"), crtest.NewNamespace(t, k8s, "t-")
	crd := &metav1.PartialObjectMetadata{}
	crd.SetGroupVersionKind(schema.GroupVersionKind{Group: "apiextensions.k8s.io", Version: "v1", Kind: "CustomResourceDefinition"})
	crd.SetName("things.escape.rudder.dev")
	noCRD := func() {
		t.Helper()
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(crd), crd); !apierrors.IsNotFound(err) {
			t.Fatalf("CRD %s exists (err=%v)", crd.Name, err)
		}
	}

	if err := k8s.Create(ctx, crtest.NewCR(crdProbeGVK, ns, "c", map[string]any{})); err != nil {
		t.Fatal(err)
	}
	stalledOn(t, crdProbeGVK, ns, "c", `CRD (crds/) CustomResourceDefinition "things.escape.rudder.dev"`, "allowClusterScoped")
	noCRD()

	if err := k8s.Create(ctx, crtest.NewCR(crdAllowedGVK, ns, "hook", map[string]any{"hookTarget": victim})); err != nil {
		t.Fatal(err)
	}
	stalledOn(t, crdAllowedGVK, ns, "hook", `hook (post-install) ConfigMap "hook-hook" in namespace "`+victim+`"`)
	noCRD()
	noConfigMaps(t, victim)

	if err := k8s.Create(ctx, crtest.NewCR(crdAllowedGVK, ns, "ok", map[string]any{})); err != nil {
		t.Fatal(err)
	}
	crtest.WaitCondition(t, k8s, crdAllowedGVK, ns, "ok", "Ready", metav1.ConditionTrue, "", timeout)
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), crd) })
	if err := k8s.Get(ctx, client.ObjectKeyFromObject(crd), crd); err != nil {
		t.Fatalf("the allowed CRD was not installed: %v", err)
	}
}

// TestTenantActsAsItsServiceAccount: with serviceAccountName, every request for the release is
// the tenant's: a Role without Secrets gives Forbidden naming them (Helm's storage is the
// tenant's too: the record is the install's first write); one without Services gives
// Forbidden naming them, although rudder itself may create Services, and the failed install
// is kept as such; granting both recovers the CR with no edit, and the release is stored in
// the tenant's namespace.
func TestTenantActsAsItsServiceAccount(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ns := crtest.NewNamespace(t, k8s, "t-")
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "deployer"}}
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "deployer"}, Rules: []rbacv1.PolicyRule{{
		APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"*"},
	}}}
	binding := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "deployer"},
		RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: "deployer"},
		Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: "deployer", Namespace: ns}}}
	for _, o := range []client.Object{sa, role, binding} {
		if err := k8s.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	if err := k8s.Create(ctx, crtest.NewCR(tenantAppGVK, ns, "app", map[string]any{})); err != nil {
		t.Fatal(err)
	}
	user := `"system:serviceaccount:` + ns + `:deployer"`
	forbidden(t, ns, "app", user, `resource "secrets"`, `namespace "`+ns+`"`, "ServiceAccount "+ns+"/deployer")

	grant := func(resource string) {
		t.Helper()
		role.Rules = append(role.Rules, rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{resource}, Verbs: []string{"*"}})
		if err := k8s.Update(ctx, role); err != nil {
			t.Fatal(err)
		}
	}
	grant("secrets")
	forbidden(t, ns, "app", user, `resource "services"`, `namespace "`+ns+`"`)
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "app"}, &corev1.Service{}); !apierrors.IsNotFound(err) {
		t.Fatalf("the Service exists although the tenant may not create it (err=%v)", err)
	}
	grant("services")
	u := crtest.WaitCondition(t, k8s, tenantAppGVK, ns, "app", "Ready", metav1.ConditionTrue, "", timeout)
	if c := crtest.Condition(u, "Released"); c.Status != metav1.ConditionTrue {
		t.Fatalf("Released after recovery: %+v", c)
	}
	// The first refused install is kept as failed; its retries ask Helm's existence check
	// first, which the missing right refuses before anything is written.
	h := helmtest.History(t, cluster.Kubeconfig, ns, "app")
	if len(h) != 2 || h[0].Info.Status != common.StatusFailed || h[1].Info.Status != common.StatusDeployed {
		t.Fatalf("want the failed install kept and one deployed revision after recovery, got %s", describe(h))
	}
	var secrets corev1.SecretList
	if err := k8s.List(ctx, &secrets, client.InNamespace(ns), client.MatchingLabels{"owner": "helm", "name": "app"}); err != nil || len(secrets.Items) != len(h) {
		t.Fatalf("release Secrets in %s: %v %d", ns, err, len(secrets.Items))
	}
}

// forbidden waits until Released=False/Forbidden names every one of parts.
func forbidden(t *testing.T, ns, name string, parts ...string) {
	t.Helper()
	crtest.Eventually(t, "Released=Forbidden naming "+strings.Join(parts, ", "), timeout, func(ctx context.Context) (bool, error) {
		u, err := crtest.Get(ctx, k8s, tenantAppGVK, ns, name)
		if err != nil {
			return false, err
		}
		c := crtest.Condition(u, "Released")
		if c == nil || c.Status != metav1.ConditionFalse || c.Reason != "Forbidden" {
			return false, fmt.Errorf("Released: %+v", c)
		}
		for _, p := range parts {
			if !strings.Contains(c.Message, p) {
				return false, fmt.Errorf("message does not name %q: %s", p, c.Message)
			}
		}
		return true, nil
	})
}

func b64(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }

// TestStoredReleaseOutsideIsNeitherRestoredNorUninstalled: a release stored before its watch
// was as strict as now (here: a revision whose manifest and delete hook reach another
// namespace, written into storage by hand) is held to today's confinement on every path that
// acts from storage: drift re-apply restores nothing of it, and uninstall deletes nothing and
// runs no hook — the CR keeps its finalizer and says why.
func TestStoredReleaseOutsideIsNeitherRestoredNorUninstalled(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ns, victim := crtest.NewNamespace(t, k8s, "t-"), crtest.NewNamespace(t, k8s, "t-")
	if err := k8s.Create(ctx, crtest.NewCR(widgetGVK, ns, "legacy", map[string]any{"message": "hi"})); err != nil {
		t.Fatal(err)
	}
	crtest.WaitCondition(t, k8s, widgetGVK, ns, "legacy", "Ready", metav1.ConditionTrue, "", timeout)
	annotateWidget(t, ns, "legacy", map[string]string{"rudder.dev/paused": "true"})
	crtest.WaitCondition(t, k8s, widgetGVK, ns, "legacy", "Paused", metav1.ConditionTrue, "", timeout)

	// Revision 2: revision 1 plus a ConfigMap in the victim namespace and a pre-delete hook
	// there, as an older, laxer rudder could have stored it.
	cfg := helmtest.Config(t, cluster.Kubeconfig, ns)
	last, err := records.V1Of(cfg.Releases.Last("legacy"))
	if err != nil {
		t.Fatal(err)
	}
	theirs := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: victim, Name: "theirs"}, Data: map[string]string{"owner": "victim"}}
	if err := k8s.Create(ctx, theirs); err != nil {
		t.Fatal(err)
	}
	rev2 := *last
	info := *last.Info
	rev2.Info, rev2.Version, rev2.Labels = &info, 2, maps.Clone(last.Labels)
	rev2.Labels[records.LabelRevision] = "2"
	rev2.Manifest += "\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: theirs, namespace: " + victim + "}\ndata: {owner: rudder}\n"
	rev2.Hooks = []*release.Hook{{Name: "cleanup", Kind: "ConfigMap", Path: "legacy/templates/hook.yaml",
		Manifest: "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: hook-ran, namespace: " + victim + "}\n",
		Events:   []release.HookEvent{release.HookPreDelete}}}
	last.Info.Status = common.StatusSuperseded
	if err := cfg.Releases.Update(last); err != nil {
		t.Fatal(err)
	}
	if err := cfg.Releases.Create(&rev2); err != nil {
		t.Fatal(err)
	}
	annotateWidget(t, ns, "legacy", nil)

	// Drift: the CR's own ConfigMap deleted is not restored either (nothing of the revision is
	// applied), and the pass says which object is out of bounds.
	if err := k8s.Delete(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "legacy"}}); err != nil {
		t.Fatal(err)
	}
	crtest.Eventually(t, "Ready=False naming the object outside", timeout, func(ctx context.Context) (bool, error) {
		u, err := crtest.Get(ctx, k8s, widgetGVK, ns, "legacy")
		if err != nil {
			return false, err
		}
		c := crtest.Condition(u, "Ready")
		if c == nil || c.Status != metav1.ConditionFalse || !strings.Contains(c.Message, `ConfigMap "theirs" in namespace "`+victim+`"`) {
			return false, fmt.Errorf("Ready: %+v", c)
		}
		return true, nil
	})
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "legacy"}, &corev1.ConfigMap{}); !apierrors.IsNotFound(err) {
		t.Fatalf("the drifted ConfigMap was restored from a revision outside the confinement (err=%v)", err)
	}

	// Uninstall: refused before anything runs.
	u, err := crtest.Get(ctx, k8s, widgetGVK, ns, "legacy")
	if err != nil {
		t.Fatal(err)
	}
	if err := k8s.Delete(ctx, u); err != nil {
		t.Fatal(err)
	}
	crtest.WaitEvent(t, k8s, ns, "legacy", "UninstallFailed", `hook (pre-delete) ConfigMap "hook-ran" in namespace "`+victim+`"`)
	var cm corev1.ConfigMap
	if err := k8s.Get(ctx, client.ObjectKeyFromObject(theirs), &cm); err != nil || cm.Data["owner"] != "victim" {
		t.Fatalf("the victim's ConfigMap was touched: %v %v", err, cm.Data)
	}
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: victim, Name: "hook-ran"}, &corev1.ConfigMap{}); !apierrors.IsNotFound(err) {
		t.Fatalf("the pre-delete hook ran in %s (err=%v)", victim, err)
	}
	if h := helmtest.History(t, cluster.Kubeconfig, ns, "legacy"); len(h) != 2 {
		t.Fatalf("history: %s", describe(h))
	}
	// Let the CR go: the person who made the old release cleans up.
	crtest.Update(t, k8s, widgetGVK, ns, "legacy", func(u *unstructured.Unstructured) { u.SetFinalizers(nil) })
}

func annotateWidget(t *testing.T, ns, name string, a map[string]string) {
	t.Helper()
	crtest.Update(t, k8s, widgetGVK, ns, name, func(u *unstructured.Unstructured) { u.SetAnnotations(a) })
}
