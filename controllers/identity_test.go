package controllers_test

import (
	"context"
	"encoding/base64"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rudder-operator/rudder/internal/crtest"
	"github.com/rudder-operator/rudder/internal/guard"
	"github.com/rudder-operator/rudder/internal/helm/helmtest"
)

var crdBoxGVK = schema.GroupVersionKind{Group: "test.rudder.dev", Version: "v1", Kind: "CRDBox"}

// crAuthor is a client of a user who may do anything with TenantBoxes and ConfigMaps of ns,
// and nothing else.
func crAuthor(t *testing.T, ns string) client.Client {
	return crtest.Author(t, k8s, cluster.Config, ns, tenantBoxGVK.Group, "tenantboxes")
}

// TestLookupsReadOnlyWhatTheReleaseMade: a CR author who may not read Secrets has a chart copy
// another app's Secret, and other CRs' release records, into a ConfigMap they can read (a
// lookup through tpl, as public charts feed values to it). The lookups read as not found, the
// CR is served, an Event names what was withheld, and nothing of the Secret or the records
// reaches the ConfigMap. The release's own objects still read as they are.
func TestLookupsReadOnlyWhatTheReleaseMade(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ns := crtest.NewNamespace(t, k8s, "t-")
	unchanged := victimSecret(t, ns, "payments-db")
	author := crAuthor(t, ns)
	// Another CR's release, whose records the thief tries to read.
	if err := k8s.Create(ctx, crtest.NewCR(tenantBoxGVK, ns, "neighbour", map[string]any{})); err != nil {
		t.Fatal(err)
	}
	crtest.WaitCondition(t, k8s, tenantBoxGVK, ns, "neighbour", "Ready", metav1.ConditionTrue, "", timeout)
	loot := "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: loot}\ndata:\n" +
		"  secret: {{ lookup \"v1\" \"Secret\" .Release.Namespace \"payments-db\" | toJson | quote }}\n" +
		"  secrets: {{ lookup \"v1\" \"Secret\" .Release.Namespace \"\" | toJson | quote }}\n" +
		"  record: {{ lookup \"v1\" \"Secret\" .Release.Namespace \"sh.helm.release.v1.neighbour.v1\" | toJson | quote }}\n" +
		"  own: {{ (lookup \"v1\" \"ConfigMap\" .Release.Namespace (printf \"%s-config\" .Release.Name)).data | toJson | quote }}\n"
	if err := author.Create(ctx, crtest.NewCR(tenantBoxGVK, ns, "thief", map[string]any{"extraManifest": loot})); err != nil {
		t.Fatal(err)
	}
	crtest.WaitCondition(t, k8s, tenantBoxGVK, ns, "thief", "Ready", metav1.ConditionTrue, "", timeout)
	crtest.WaitEvent(t, k8s, ns, "thief", "LookupWithheld", "Secret "+ns+"/payments-db", "sh.helm.release.v1.neighbour.v1")
	// The second revision renders with the first's objects there: its own ConfigMap reads.
	crtest.Update(t, author, tenantBoxGVK, ns, "thief", func(u *unstructured.Unstructured) {
		_ = unstructured.SetNestedField(u.Object, int64(2), "spec", "replicaCount")
	})
	crtest.Eventually(t, "the thief's second revision", timeout, func(ctx context.Context) (bool, error) {
		return len(helmtest.History(t, cluster.Kubeconfig, ns, "thief")) == 2, nil
	})
	var cm corev1.ConfigMap
	crtest.Eventually(t, "the loot ConfigMap of revision 2, with the release's own ConfigMap read", timeout, func(ctx context.Context) (bool, error) {
		err := author.Get(ctx, client.ObjectKey{Namespace: ns, Name: "loot"}, &cm)
		return err == nil && strings.Contains(cm.Data["own"], "replicas"), client.IgnoreNotFound(err)
	})
	all := strings.Join([]string{cm.Data["secret"], cm.Data["secrets"], cm.Data["record"]}, " ")
	for _, leak := range []string{"victim", base64.StdEncoding.EncodeToString([]byte("victim")), "payments-db", "sh.helm.release", "H4sI"} {
		if strings.Contains(all, leak) {
			t.Fatalf("the CR author read %q through a lookup: %s", leak, all)
		}
	}
	unchanged()
}

// TestIdentitiesAreNotHandedOut: a CR author cannot make the release mint a token of the
// namespace's deployer ServiceAccount, run a Pod as it, or bind anyone but the release's own
// ServiceAccounts; each is refused before anything is applied, naming the object and the
// identity. A release that makes its ServiceAccount, runs as it and binds it is served.
func TestIdentitiesAreNotHandedOut(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ns := crtest.NewNamespace(t, k8s, "t-")
	author := crAuthor(t, ns)
	if err := k8s.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "deployer"}}); err != nil {
		t.Fatal(err)
	}
	attacks := map[string]struct {
		obj  map[string]any
		want string
	}{
		"mint": {map[string]any{"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/service-account-token",
			"metadata": map[string]any{"name": "deployer-token", "annotations": map[string]any{"kubernetes.io/service-account.name": "deployer"}}},
			`Secret "deployer-token": a token Secret for the ServiceAccount "deployer"`},
		"runas": {map[string]any{"apiVersion": "v1", "kind": "Pod", "metadata": map[string]any{"name": "runas"},
			"spec": map[string]any{"serviceAccountName": "deployer", "containers": []any{map[string]any{"name": "c", "image": "busybox"}}}},
			`Pod "runas": runs Pods as the ServiceAccount "deployer"`},
		"bind": {map[string]any{"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": map[string]any{"name": "bind"},
			"roleRef":  map[string]any{"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "cr-author"},
			"subjects": []any{map[string]any{"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": "mallory"}}},
			`RoleBinding "bind": binds the User mallory`},
	}
	for name, a := range attacks {
		if err := author.Create(ctx, crtest.NewCR(tenantBoxGVK, ns, name, map[string]any{"extraObjects": []any{a.obj}})); err != nil {
			t.Fatal(err)
		}
	}
	for name, a := range attacks {
		stalledOn(t, tenantBoxGVK, ns, name, a.want)
	}
	absent(t, client.ObjectKey{Namespace: ns, Name: "deployer-token"}, &corev1.Secret{})
	absent(t, client.ObjectKey{Namespace: ns, Name: "runas"}, &corev1.Pod{})
	absent(t, client.ObjectKey{Namespace: ns, Name: "bind"}, &rbacv1.RoleBinding{})

	own := []any{
		map[string]any{"apiVersion": "v1", "kind": "ServiceAccount", "metadata": map[string]any{"name": "own"}},
		map[string]any{"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/service-account-token",
			"metadata": map[string]any{"name": "own-token", "annotations": map[string]any{"kubernetes.io/service-account.name": "own"}}},
		map[string]any{"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": map[string]any{"name": "own"},
			"roleRef":  map[string]any{"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "cr-author"},
			"subjects": []any{map[string]any{"kind": "ServiceAccount", "name": "own"}}},
	}
	if err := author.Create(ctx, crtest.NewCR(tenantBoxGVK, ns, "own", map[string]any{"extraObjects": own})); err != nil {
		t.Fatal(err)
	}
	crtest.WaitCondition(t, k8s, tenantBoxGVK, ns, "own", "Ready", metav1.ConditionTrue, "", timeout)
}

// TestClusterScopedNameNamesItsHolder: a chart names its ClusterRole after the release; a CR
// of the same name in another namespace finds it taken. Its install fails with nothing
// changed, and its condition names the CR whose release holds the ClusterRole.
func TestClusterScopedNameNamesItsHolder(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	first, second := crtest.NewNamespace(t, k8s, "t-"), crtest.NewNamespace(t, k8s, "t-")
	name := "holder-" + first // unique to the test, the same for both CRs
	spec := map[string]any{"extraObjects": []any{map[string]any{
		"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
		"metadata": map[string]any{"name": "{{ .Release.Name }}-clusterrole"},
		"rules":    []any{map[string]any{"apiGroups": []any{""}, "resources": []any{"configmaps"}, "verbs": []any{"get"}}},
	}}}
	if err := k8s.Create(ctx, crtest.NewCR(roleBoxGVK, first, name, spec)); err != nil {
		t.Fatal(err)
	}
	crtest.WaitCondition(t, k8s, roleBoxGVK, first, name, "Ready", metav1.ConditionTrue, "", timeout)
	t.Cleanup(func() {
		_ = k8s.Delete(context.Background(), &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name + "-clusterrole"}})
	})
	if err := k8s.Create(ctx, crtest.NewCR(roleBoxGVK, second, name, spec)); err != nil {
		t.Fatal(err)
	}
	u := crtest.WaitCondition(t, k8s, roleBoxGVK, second, name, "Released", metav1.ConditionFalse, "InstallFailed", timeout)
	holder := "RoleBox/" + first + "/" + name
	if msg := crtest.Condition(u, "Released").Message; !strings.Contains(msg, holder) {
		t.Fatalf("the condition does not name the CR holding the ClusterRole (%s): %s", holder, msg)
	}
}

// TestNothingIsCreatedBeforeTheChecks: a CRD rendered in templates/ with a CR of it (which
// rudder creates first, so that Helm can build the CR) and, from values, a hook outside the
// CR's namespace, in a chart whose own templates have no hook (so no check runs before the
// render). The hook is refused before anything is created: the CRD does not exist.
func TestNothingIsCreatedBeforeTheChecks(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ns, victim := crtest.NewNamespace(t, k8s, "t-"), crtest.NewNamespace(t, k8s, "t-")
	group := ns + ".box.rudder.dev"
	crd := map[string]any{"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
		"metadata": map[string]any{"name": "sprockets." + group},
		"spec": map[string]any{"group": group, "scope": "Namespaced",
			"names": map[string]any{"kind": "Sprocket", "listKind": "SprocketList", "plural": "sprockets", "singular": "sprocket"},
			"versions": []any{map[string]any{"name": "v1", "served": true, "storage": true,
				"schema": map[string]any{"openAPIV3Schema": map[string]any{"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}}}}
	cr := map[string]any{"apiVersion": group + "/v1", "kind": "Sprocket", "metadata": map[string]any{"name": "s"}}
	hook := map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": "escape", "namespace": victim, "annotations": map[string]any{"helm.sh/hook": "pre-install"}}}
	if err := k8s.Create(ctx, crtest.NewCR(crdBoxGVK, ns, "order", map[string]any{"extraObjects": []any{crd, cr, hook}})); err != nil {
		t.Fatal(err)
	}
	stalledOn(t, crdBoxGVK, ns, "order", `hook (pre-install) ConfigMap "escape" in namespace "`+victim+`"`)
	crdObj := &unstructured.Unstructured{}
	crdObj.SetGroupVersionKind(guard.CRDKind)
	absent(t, client.ObjectKey{Name: "sprockets." + group}, crdObj)
	noConfigMaps(t, victim)
}
