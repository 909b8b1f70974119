// Package config_test checks the kustomize manifests against a real control plane: they
// validate and apply, the manager Deployment lands on the kwok node, and the generated
// ClusterRole is enough for the samples and refuses the rest with a clear condition.
package config_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"sigs.k8s.io/yaml"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	rstatus "github.com/rudder-operator/rudder/api/status"
	"github.com/rudder-operator/rudder/internal/crtest"
	"github.com/rudder-operator/rudder/internal/testcluster"
	"github.com/rudder-operator/rudder/internal/watches"
	"github.com/rudder-operator/rudder/internal/wiring"
)

const (
	systemNS       = "rudder-system"
	serviceAccount = "system:serviceaccount:rudder-system:rudder-manager"
)

var (
	cluster *testcluster.Cluster
	k8s     client.Client
	root    string
	// passes counts the passes of the rudders the tests run in this process, per CR.
	passes = crtest.NewPassCounter()

	nginxGVK  = schema.GroupVersionKind{Group: "operator.example.com", Version: "v1alpha1", Kind: "NginxOperator"}
	atGVK     = schema.GroupVersionKind{Group: "cnat.ishankhare.dev", Version: "v1alpha1", Kind: "At"}
	appGVK    = schema.GroupVersionKind{Group: "apps.sunstrider.cn", Version: "v1", Kind: "Application"}
	widgetGVK = schema.GroupVersionKind{Group: "test.rudder.dev", Version: "v1", Kind: "Widget"}
)

func TestMain(m *testing.M) {
	os.Exit(crtest.Main(m, crtest.Suite{Scheme: wiring.Scheme(), Setup: func(e *crtest.Env) (func() error, error) {
		cluster, k8s, root = e.Cluster, e.Client, e.Root
		return nil, nil
	}}))
}

// tool runs bin/<name> against the test cluster from the repository root, failing the test on
// an error.
func tool(t *testing.T, name string, args ...string) string {
	t.Helper()
	cmd := cluster.Command(name, args...)
	cmd.Dir = root
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

func kubectl(t *testing.T, args ...string) string {
	t.Helper()
	return tool(t, "kubectl", args...)
}

// waitEstablished waits until the API server serves the CRD of that name. (kubectl wait
// --for=condition=Established fails, rather than waits, on a CRD whose status has no
// conditions yet, right after it is applied.)
func waitEstablished(t *testing.T, name string) {
	t.Helper()
	crd := schema.GroupVersionKind{Group: "apiextensions.k8s.io", Version: "v1", Kind: "CustomResourceDefinition"}
	crtest.Eventually(t, "CRD "+name+" established", time.Minute, func(ctx context.Context) (bool, error) {
		u, err := crtest.Get(ctx, k8s, crd, "", name)
		if err != nil {
			return false, client.IgnoreNotFound(err)
		}
		c := crtest.Condition(u, "Established")
		return c != nil && c.Status == metav1.ConditionTrue, nil
	})
}

var deployOnce = sync.OnceValue(func() error {
	cmd := cluster.Command("kubectl", "apply", "--server-side", "-k", "config/default")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("kubectl apply -k config/default: %w\n%s", err, out)
	}
	return nil
})

// deploy applies config/default once for the whole package (the namespace first, so a server
// dry run can validate every namespaced object too).
func deploy(t *testing.T) {
	t.Helper()
	if err := deployOnce(); err != nil {
		t.Fatal(err)
	}
}

// TestKustomizeDefault: config/default (and the PVC overlay) validate on the API server, and a
// real apply runs the manager Deployment on the kwok node with the config volume it expects.
// TestKustomizeShards: config/shards validates on the API server as two manager Deployments,
// with the same ServiceAccount and configuration, each with its own shard selector (and so its
// own leader election).
func TestKustomizeShards(t *testing.T) {
	crtest.NeedsCluster(t)
	kubectl(t, "apply", "--server-side", "-f", "config/default/namespace.yaml")
	out := kubectl(t, "apply", "--server-side", "--dry-run=server", "-k", "config/shards", "-o", "yaml")
	var list struct {
		Items []appsv1.Deployment `json:"items"`
	}
	if err := yaml.Unmarshal([]byte(out), &list); err != nil {
		t.Fatal(err)
	}
	selectors := map[string]string{}
	for _, d := range list.Items {
		if d.Kind != "Deployment" {
			continue
		}
		spec := d.Spec.Template.Spec
		if spec.ServiceAccountName != "rudder-manager" || len(spec.Volumes) < 2 {
			t.Errorf("%s: ServiceAccount %q, volumes %v", d.Name, spec.ServiceAccountName, spec.Volumes)
		}
		for _, a := range spec.Containers[0].Args {
			if v, ok := strings.CutPrefix(a, "--watch-label-selector="); ok {
				selectors[d.Name] = v
			}
		}
	}
	if len(selectors) != 2 || selectors["rudder-manager"] != "rudder.dev/shard!=a" || selectors["rudder-manager-shard-a"] != "rudder.dev/shard=a" {
		t.Fatalf("shard selectors: %v", selectors)
	}
}

func TestKustomizeDefault(t *testing.T) {
	crtest.NeedsCluster(t)
	ctx := context.Background()
	kubectl(t, "apply", "--server-side", "-f", "config/default/namespace.yaml")
	for _, dir := range []string{"config/default", "config/pvc"} {
		out := kubectl(t, "apply", "--server-side", "--dry-run=server", "-k", dir)
		if !strings.Contains(out, "deployment.apps/rudder-manager serverside-applied (server dry run)") {
			t.Fatalf("dry run of %s did not validate the manager Deployment:\n%s", dir, out)
		}
	}
	deploy(t)

	var dep appsv1.Deployment
	crtest.Eventually(t, "the manager Deployment available", 90*time.Second, func(ctx context.Context) (bool, error) {
		if err := k8s.Get(ctx, client.ObjectKey{Namespace: systemNS, Name: "rudder-manager"}, &dep); err != nil {
			return false, err
		}
		return dep.Status.AvailableReplicas == 1, nil
	})
	var pods corev1.PodList
	if err := k8s.List(ctx, &pods, client.InNamespace(systemNS), client.MatchingLabels{"app.kubernetes.io/name": "rudder"}); err != nil {
		t.Fatal(err)
	}
	if len(pods.Items) != 1 || pods.Items[0].Spec.NodeName != testcluster.NodeName || pods.Items[0].Status.Phase != corev1.PodRunning {
		t.Fatalf("manager pods: %+v", pods.Items)
	}
	pod := pods.Items[0]
	if pod.Spec.ServiceAccountName != "rudder-manager" || pod.Spec.SecurityContext.RunAsNonRoot == nil || !*pod.Spec.SecurityContext.RunAsNonRoot {
		t.Fatalf("pod identity: sa %q, securityContext %+v", pod.Spec.ServiceAccountName, pod.Spec.SecurityContext)
	}
	for _, m := range pod.Spec.Containers[0].VolumeMounts {
		if m.Name == "config" && (m.MountPath != "/etc/rudder" || !m.ReadOnly) {
			t.Fatalf("config mounted %+v, want read-only at /etc/rudder", m)
		}
	}

	// The projected volume rebuilds the repository's layout: every chart file at its path.
	var charts corev1.ConfigMap
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: systemNS, Name: "rudder-charts"}, &charts); err != nil {
		t.Fatal(err)
	}
	paths := map[string]string{}
	for _, v := range pod.Spec.Volumes {
		if v.Name != "config" || v.Projected == nil {
			continue
		}
		for _, s := range v.Projected.Sources {
			for _, it := range s.ConfigMap.Items {
				paths[it.Path] = it.Key
			}
		}
	}
	if paths["watches.yaml"] != "watches.yaml" {
		t.Fatalf("watches.yaml not projected: %v", paths)
	}
	err := filepath.WalkDir(filepath.Join(root, "charts", "nginx"), func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(filepath.Join(root), p)
		key, ok := paths[rel]
		if !ok {
			return fmt.Errorf("%s is not in the config volume", rel)
		}
		want, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if charts.Data[key] != string(want) {
			return fmt.Errorf("%s: ConfigMap key %s differs from the file", rel, key)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestManagerRBAC runs rudder in-process as the manager's ServiceAccount (impersonated), with
// leader election in rudder-system: the three samples reconcile with the shipped ClusterRole,
// and a chart rendering a kind outside it fails with a condition naming what is missing, and
// recovers, without touching the CR, once the role grants it.
func TestManagerRBAC(t *testing.T) {
	crtest.NeedsCluster(t)
	deploy(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	kubectl(t, "apply", "--server-side", "-f", "config/testdata/crds/widget.yaml", "-f", "config/testdata/widget-role.yaml")
	waitEstablished(t, "widgets.test.rudder.dev")

	ws, err := watches.Load(filepath.Join(root, "watches.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	extra, err := watches.Load(filepath.Join(root, "config/testdata/watches.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	cfg := rest.CopyConfig(cluster.Config)
	cfg.Impersonate = rest.ImpersonationConfig{
		UserName: serviceAccount,
		Groups:   []string{"system:serviceaccounts", "system:serviceaccounts:" + systemNS, "system:authenticated"},
	}
	mgr, _, err := wiring.NewManager(cfg, wiring.ManagerOptions{
		Watches: append(ws, extra...), LeaderElection: true, LeaderElectionNS: systemNS,
		MaxConcurrentReconciles: 2, OnPass: passes.Observe,
	})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("manager: %v", err)
		}
	}()

	kubectl(t, "apply", "-k", "config/samples")
	crtest.WaitCondition(t, k8s, nginxGVK, "nginx-operator-system", "nginxoperator-sample", "Ready", metav1.ConditionTrue, "", 120*time.Second)
	crtest.WaitCondition(t, k8s, appGVK, "default", "nginx-sample", "Ready", metav1.ConditionTrue, "", 120*time.Second)
	crtest.Eventually(t, "at-sample DONE", 120*time.Second, func(ctx context.Context) (bool, error) {
		u, err := crtest.Get(ctx, k8s, atGVK, "default", "at-sample")
		if err != nil {
			return false, err
		}
		phase, _, _ := unstructured.NestedString(u.Object, "status", "phase")
		return phase == "DONE", nil
	})

	// A Widget's chart renders a ConfigMap, which the role does not grant at all: Helm's create
	// is refused, the failed install's objects removed (its record kept), and the CR says so.
	w := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"message": "hi"}}}
	w.SetGroupVersionKind(widgetGVK)
	w.SetNamespace("default")
	w.SetName("needs-configmaps")
	if err := k8s.Create(ctx, w); err != nil {
		t.Fatal(err)
	}
	u := crtest.WaitCondition(t, k8s, widgetGVK, "default", "needs-configmaps", "Released", metav1.ConditionFalse, rstatus.ReasonForbidden, 60*time.Second)
	if msg := crtest.Condition(u, "Released").Message; !strings.Contains(msg, "configmaps") || !strings.Contains(msg, "forbidden") {
		t.Fatalf("Released message does not say what was refused: %s", msg)
	}
	if r := crtest.Condition(u, "Ready"); r == nil || r.Status != metav1.ConditionFalse {
		t.Fatalf("Ready: %+v", r)
	}
	expectEvent(t, "needs-configmaps", rstatus.ReasonForbidden)

	// Granting everything but list/watch: the install goes through, and the dependent watch that
	// would never sync is refused up front, naming the missing verbs.
	grant(t, "rudder-manager-widgets-cm", "configmaps", "get", "create", "update", "patch", "delete")
	crtest.Eventually(t, "installed, and Ready=False naming the missing verbs", 60*time.Second, func(ctx context.Context) (bool, error) {
		u, err := crtest.Get(ctx, k8s, widgetGVK, "default", "needs-configmaps")
		if err != nil {
			return false, err
		}
		rel, ready := crtest.Condition(u, "Released"), crtest.Condition(u, "Ready")
		if rel == nil || ready == nil || rel.Status != metav1.ConditionTrue || ready.Status != metav1.ConditionFalse {
			return false, fmt.Errorf("Released %+v, Ready %+v", rel, ready)
		}
		return ready.Reason == rstatus.ReasonForbidden && strings.Contains(ready.Message, "may not list/watch configmaps cluster-wide"), nil
	})

	// The full rule: Ready, with nothing done to the CR.
	grant(t, "rudder-manager-widgets-cm", "configmaps", "get", "list", "watch", "create", "update", "patch", "delete")
	crtest.WaitCondition(t, k8s, widgetGVK, "default", "needs-configmaps", "Ready", metav1.ConditionTrue, "", 60*time.Second)
	var cm corev1.ConfigMap
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: "default", Name: "needs-configmaps"}, &cm); err != nil || cm.Data["message"] != "hi" {
		t.Fatalf("configmap: %v %v", err, cm.Data)
	}

	// An upgrade that adds a kind outside the role (a ServiceAccount) is refused before Helm
	// records a revision: the release stays at its deployed revision (the failed install's
	// record, kept, is the one before it; no rollback revision per retry), the CR says why, and
	// granting the kind lets the retry through.
	w, err = crtest.Get(ctx, k8s, widgetGVK, "default", "needs-configmaps")
	if err != nil {
		t.Fatal(err)
	}
	base, _, _ := unstructured.NestedInt64(w.Object, "status", "release", "revision")
	if err := unstructured.SetNestedField(w.Object, true, "spec", "serviceAccount"); err != nil {
		t.Fatal(err)
	}
	if err := k8s.Update(ctx, w); err != nil {
		t.Fatal(err)
	}
	u = crtest.WaitCondition(t, k8s, widgetGVK, "default", "needs-configmaps", "Released", metav1.ConditionFalse, rstatus.ReasonForbidden, 60*time.Second)
	if msg := crtest.Condition(u, "Released").Message; !strings.Contains(msg, "serviceaccounts") || !strings.Contains(msg, fmt.Sprintf("stays at revision %d", base)) {
		t.Fatalf("Released message: %s", msg)
	}
	// A few retries, counted: each is a refused upgrade.
	refused := crtest.Metric(t, "rudder_release_actions_total", map[string]string{"gvk": "Widget.test.rudder.dev/v1", "action": "upgrade", "result": "failed"})
	crtest.Eventually(t, "three more refused retries", 60*time.Second, func(context.Context) (bool, error) {
		return crtest.Metric(t, "rudder_release_actions_total", map[string]string{"gvk": "Widget.test.rudder.dev/v1", "action": "upgrade", "result": "failed"}) >= refused+3, nil
	})
	if out := tool(t, "helm", "history", "needs-configmaps", "-n", "default"); strings.Count(out, "\n") != int(base)+1 {
		t.Fatalf("retries of a refused upgrade changed the history:\n%s", out)
	}
	grant(t, "rudder-manager-widgets-sa", "serviceaccounts", "get", "list", "watch", "create", "update", "patch", "delete")
	u = crtest.WaitCondition(t, k8s, widgetGVK, "default", "needs-configmaps", "Ready", metav1.ConditionTrue, "", 60*time.Second)
	if rev, _, _ := unstructured.NestedInt64(u.Object, "status", "release", "revision"); rev != base+1 {
		t.Fatalf("revision after the grant = %d, want %d", rev, base+1)
	}
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: "default", Name: "needs-configmaps"}, &corev1.ServiceAccount{}); err != nil {
		t.Fatal(err)
	}
}

// grant (re)binds a ClusterRole with verbs on a core resource to the manager's ServiceAccount.
func grant(t *testing.T, name, resource string, verbs ...string) {
	t.Helper()
	ctx := context.Background()
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if _, err := controllerutil.CreateOrUpdate(ctx, k8s, role, func() error {
		role.Rules = []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{resource}, Verbs: verbs}}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if _, err := controllerutil.CreateOrUpdate(ctx, k8s, binding, func() error {
		binding.RoleRef = rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: name}
		binding.Subjects = []rbacv1.Subject{{Kind: "ServiceAccount", Name: "rudder-manager", Namespace: systemNS}}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

func expectEvent(t *testing.T, object, reason string) {
	t.Helper()
	crtest.Eventually(t, "a "+reason+" event on "+object, 30*time.Second, func(ctx context.Context) (bool, error) {
		var evs corev1.EventList
		if err := k8s.List(ctx, &evs, client.InNamespace("default")); err != nil {
			return false, err
		}
		for _, e := range evs.Items {
			if e.InvolvedObject.Name == object && e.Reason == reason {
				return true, nil
			}
		}
		return false, nil
	})
}
