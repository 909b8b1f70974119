package config_test

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	rstatus "github.com/rudder-operator/rudder/api/status"
	"github.com/rudder-operator/rudder/internal/crtest"
	"github.com/rudder-operator/rudder/internal/testcluster"
	"github.com/rudder-operator/rudder/internal/watches"
	"github.com/rudder-operator/rudder/internal/wiring"
)

// asServiceAccount is the cluster's configuration impersonating a ServiceAccount, as a Pod
// running as it would authenticate.
func asServiceAccount(ns, name string) *rest.Config {
	cfg := rest.CopyConfig(cluster.Config)
	cfg.Impersonate = rest.ImpersonationConfig{
		UserName: "system:serviceaccount:" + ns + ":" + name,
		Groups:   []string{"system:serviceaccounts", "system:serviceaccounts:" + ns, "system:authenticated"},
	}
	return cfg
}

// startRudder runs the built-in watches in-process until the test ends.
func startRudder(t *testing.T, cfg *rest.Config, opts wiring.ManagerOptions) {
	t.Helper()
	ws, err := watches.Load(filepath.Join(root, "watches.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	startRudderWith(t, cfg, ws, opts)
}

// startRudderWith runs rudder with the given watches in-process until the test ends, or until
// the stop it returns is called.
func startRudderWith(t *testing.T, cfg *rest.Config, ws []*watches.Watch, opts wiring.ManagerOptions) (stop func()) {
	t.Helper()
	opts.Watches = ws
	opts.OnPass = passes.Observe
	mgr, _, err := wiring.NewManager(cfg, opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	stop = sync.OnceFunc(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("manager: %v", err)
		}
	})
	t.Cleanup(stop)
	return stop
}

// TestTenancyOverlay: config/tenancy validates; rudder with its ClusterRole (no write to any
// operand) and its --default-service-account brings an NginxOperator to Ready in a namespace
// whose Role grants the operands to ServiceAccount "rudder", and reports Forbidden in one that
// grants nothing.
func TestTenancyOverlay(t *testing.T) {
	crtest.NeedsCluster(t)
	deploy(t)
	ctx := context.Background()
	out := kubectl(t, "apply", "--server-side", "--dry-run=server", "-k", "config/tenancy")
	if !strings.Contains(out, "clusterrole.rbac.authorization.k8s.io/rudder-manager-base serverside-applied (server dry run)") {
		t.Fatalf("dry run of config/tenancy:\n%s", out)
	}

	// The overlay's ClusterRole and default ServiceAccount, given to a ServiceAccount of its own
	// (config/default's rudder-manager keeps the default role for the other tests).
	var role rbacv1.ClusterRole
	var defaultSA string
	for _, doc := range strings.Split(kubectl(t, "kustomize", "config/tenancy"), "\n---\n") {
		switch {
		case strings.Contains(doc, "kind: ClusterRole\n") && strings.Contains(doc, "name: rudder-manager-base\n"):
			if err := yaml.Unmarshal([]byte(doc), &role); err != nil {
				t.Fatal(err)
			}
		case strings.Contains(doc, "kind: Deployment\n"):
			for _, l := range strings.Split(doc, "\n") {
				if _, v, ok := strings.Cut(l, "--default-service-account="); ok {
					defaultSA = strings.TrimSpace(v)
				}
			}
		}
	}
	if len(role.Rules) == 0 || defaultSA == "" {
		t.Fatalf("config/tenancy: ClusterRole rules %v, --default-service-account %q", role.Rules, defaultSA)
	}
	for _, r := range role.Rules {
		for _, v := range r.Verbs {
			if (v == "create" || v == "delete" || v == "update" || v == "patch" || v == "*") && !strings.Contains(strings.Join(r.Resources, ","), "status") &&
				!strings.Contains(strings.Join(r.Resources, ","), "events") && !isCR(r.Resources) {
				t.Errorf("the tenancy role may %s %v: rudder must not write operands itself", v, r.Resources)
			}
		}
	}
	role.ObjectMeta = metav1.ObjectMeta{Name: "rudder-tenancy-test"}
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: systemNS, Name: "rudder-tenancy"}}
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "rudder-tenancy-test"},
		RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: role.Name},
		Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Namespace: systemNS, Name: sa.Name}}}
	for _, o := range []client.Object{&role, sa, binding} {
		if err := k8s.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}

	// Tenant team-a grants what charts/nginx renders, and Helm's storage, to "rudder".
	for _, ns := range []string{"team-a", "team-b"} {
		if err := k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			t.Fatal(err)
		}
	}
	tenant := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "rudder"}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"secrets", "services"}, Verbs: []string{"*"}},
		{APIGroups: []string{"apps"}, Resources: []string{"deployments"}, Verbs: []string{"*"}},
	}}
	tenantBinding := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "rudder"},
		RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: "rudder"},
		Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Namespace: "team-a", Name: defaultSA}}}
	for _, o := range []client.Object{tenant, tenantBinding} {
		if err := k8s.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}

	startRudder(t, asServiceAccount(systemNS, sa.Name), wiring.ManagerOptions{DefaultServiceAccount: defaultSA, WatchNamespaces: []string{"team-a", "team-b"}, SeveralManagers: true})
	for _, ns := range []string{"team-a", "team-b"} {
		cr := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"port": int64(8082), "replicas": int64(3)}}}
		cr.SetGroupVersionKind(nginxGVK)
		cr.SetNamespace(ns)
		cr.SetName("nginxoperator-sample")
		if err := k8s.Create(ctx, cr); err != nil {
			t.Fatal(err)
		}
	}
	crtest.WaitCondition(t, k8s, nginxGVK, "team-a", "nginxoperator-sample", "Ready", metav1.ConditionTrue, "", 120*time.Second)
	u := crtest.WaitCondition(t, k8s, nginxGVK, "team-b", "nginxoperator-sample", "Released", metav1.ConditionFalse, rstatus.ReasonForbidden, 60*time.Second)
	if msg := crtest.Condition(u, "Released").Message; !strings.Contains(msg, "system:serviceaccount:team-b:"+defaultSA) {
		t.Fatalf("Forbidden does not name the tenant's ServiceAccount: %s", msg)
	}
}

func isCR(resources []string) bool {
	for _, r := range resources {
		switch strings.Split(r, "/")[0] {
		case "nginxoperators", "ats", "applications":
		default:
			return false
		}
	}
	return true
}

// TestMetricsAuthentication: with --metrics-secure (the default) /metrics is HTTPS and
// answers only clients that authenticate and may get /metrics (ClusterRole
// rudder-metrics-reader); rudder runs as its ServiceAccount with config/rbac's roles.
func TestMetricsAuthentication(t *testing.T) {
	crtest.NeedsCluster(t)
	deploy(t)
	ctx := context.Background()
	free, err := testcluster.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	addr := free.String()
	startRudder(t, asServiceAccount(systemNS, "rudder-manager"), wiring.ManagerOptions{MetricsBindAddress: addr, MetricsSecure: true,
		WatchNamespaces: []string{"metrics-test"}, SeveralManagers: true})

	cs, err := kubernetes.NewForConfig(cluster.Config)
	if err != nil {
		t.Fatal(err)
	}
	token := func(name string) string {
		t.Helper()
		if _, err := cs.CoreV1().ServiceAccounts("default").Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		tr, err := cs.CoreV1().ServiceAccounts("default").CreateToken(ctx, name, &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return tr.Status.Token
	}
	scraper, stranger := token("scraper"), token("stranger")
	if err := k8s.Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "scraper-metrics"},
		RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "rudder-metrics-reader"},
		Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Namespace: "default", Name: "scraper"}}}); err != nil {
		t.Fatal(err)
	}

	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // rudder's self-signed serving certificate
	scrape := func(token string) (int, string, error) {
		req, err := http.NewRequest(http.MethodGet, "https://"+addr+"/metrics", nil)
		if err != nil {
			return 0, "", err
		}
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := hc.Do(req)
		if err != nil {
			return 0, "", err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b), err
	}
	crtest.Eventually(t, "the metrics endpoint serving a scraper", 60*time.Second, func(context.Context) (bool, error) {
		code, body, err := scrape(scraper)
		if err != nil {
			return false, err
		}
		if code != http.StatusOK || !strings.Contains(body, "controller_runtime_reconcile_total") {
			return false, fmt.Errorf("scraper got %d: %.200s", code, body)
		}
		return true, nil
	})
	for who, tc := range map[string]struct {
		token string
		want  int
	}{
		"no token": {"", http.StatusUnauthorized},
		"a ServiceAccount without the reader role": {stranger, http.StatusForbidden},
		// controller-runtime's filter answers 500 when the TokenReview says the token is bad.
		"a bad token": {"not-a-token", 0},
	} {
		code, body, err := scrape(tc.token)
		if err != nil {
			t.Fatal(err)
		}
		if (tc.want != 0 && code != tc.want) || code < 400 || strings.Contains(body, "controller_runtime_") {
			t.Errorf("%s: got %d (%.100s), want %d", who, code, body, tc.want)
		}
	}
	// Plain HTTP is not served.
	if resp, err := (&http.Client{Timeout: 5 * time.Second}).Get("http://" + addr + "/metrics"); err == nil {
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			t.Fatal("metrics served over plain HTTP")
		}
	}
}
