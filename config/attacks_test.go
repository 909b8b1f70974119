package config_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rudder-operator/rudder/internal/crtest"
	"github.com/rudder-operator/rudder/internal/guard"
	"github.com/rudder-operator/rudder/internal/helm/helmtest"
)

// TestTenantAttacksAreRefused (issue 49): a CR author — a user with rights on the CR kind
// (and ConfigMaps) only — tries through a chart written the way bitnami's are, served by the
// watch `rudder scaffold` writes for it, to get what she does not hold: a binding to admin,
// rules added to the chart's Role, a privileged Pod, externalIPs, another app's Secret
// through the kubelet (existingSecret, extraEnvVarsSecret, an extra volume) and another
// team's Deployment through an HPA. Each CR is Stalled naming the object, the field and the
// watch field that would allow it; nothing of it is applied; the victims are unchanged. The
// chart's defaults, by the same watch, are Ready; a Secret that says it is meant for a CR may
// be named by it; the release's own ServiceAccount token reads as not found to a lookup.
func TestTenantAttacksAreRefused(t *testing.T) {
	crtest.NeedsCluster(t)
	deploy(t)
	ctx := context.Background()
	s := serveScaffolded(t, compatCase{kind: "WebApp", chart: filepath.Join(root, "config", "testdata", "charts", "webapp")}, nil)
	gvk, ns := s.gvk, s.ns
	crtest.WaitCondition(t, k8s, gvk, ns, s.name, "Ready", metav1.ConditionTrue, "", 3*time.Minute)
	author := crtest.Author(t, k8s, cluster.Config, ns, gvk.Group, "webapps")

	// The victims: another app's Secret and Deployment in the same namespace.
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "payments-db"}, StringData: map[string]string{"password": "hunter2"}}
	payments := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "payments"}, Spec: appsv1.DeploymentSpec{
		Replicas: ptr.To[int32](3),
		Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "payments"}},
		Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "payments"}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "payments"}}}}}}
	for _, o := range []client.Object{secret, payments} {
		if err := k8s.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	var apiService corev1.Service
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: "default", Name: "kubernetes"}, &apiService); err != nil {
		t.Fatal(err)
	}

	attacks := map[string]struct {
		spec map[string]any
		want []string // pieces of the Stalled message
	}{
		"admin": {map[string]any{"extraDeploy": []any{
			map[string]any{"apiVersion": "v1", "kind": "ServiceAccount", "metadata": map[string]any{"name": "helper"}},
			map[string]any{"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/service-account-token",
				"metadata": map[string]any{"name": "helper-token", "annotations": map[string]any{"kubernetes.io/service-account.name": "helper"}}},
			map[string]any{"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": map[string]any{"name": "helper-admin"},
				"roleRef":  map[string]any{"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "admin"},
				"subjects": []any{map[string]any{"kind": "ServiceAccount", "name": "helper"}}},
		}}, []string{`RoleBinding "helper-admin"`, `binds the ClusterRole "admin"`, "allowRoles"}},
		"rolerules": {map[string]any{"rbac": map[string]any{"extraRoleRules": []any{
			map[string]any{"apiGroups": []any{""}, "resources": []any{"secrets"}, "verbs": []any{"get"}}}}},
			[]string{`Role "rolerules-webapp"`, `grants get secrets`, "allowRules"}},
		"privileged": {map[string]any{"hostNetwork": true, "hostIPC": true,
			"containerSecurityContext": map[string]any{"enabled": true, "privileged": true, "runAsUser": 0, "runAsNonRoot": false},
			"extraVolumes":             []any{map[string]any{"name": "root", "hostPath": map[string]any{"path": "/"}}},
			"extraVolumeMounts":        []any{map[string]any{"name": "root", "mountPath": "/host"}}},
			[]string{`Deployment "privileged-webapp"`, `violates PodSecurity "restricted:latest"`, "hostNetwork=true", `privileged (container "webapp"`, `restricted volume types (volume "root" uses restricted volume type "hostPath")`, "podSecurity"}},
		"externalips": {map[string]any{"service": map[string]any{"externalIPs": []any{apiService.Spec.ClusterIP}}},
			[]string{`Service "externalips-webapp"`, "spec.externalIPs", "allowExternalIPs"}},
		"existingsecret": {map[string]any{"existingSecret": "payments-db"},
			[]string{`containers[webapp].env[WEBAPP_PASSWORD].valueFrom.secretKeyRef names the Secret "payments-db"`, "allowReads", guard.AnnotationValuesFor}},
		"envsecret": {map[string]any{"extraEnvVarsSecret": "payments-db"},
			[]string{`containers[webapp].envFrom[0].secretRef names the Secret "payments-db"`}},
		"volume": {map[string]any{"extraVolumes": []any{map[string]any{"name": "db", "secret": map[string]any{"secretName": "payments-db"}}}},
			[]string{`volumes[db].secret.secretName names the Secret "payments-db"`}},
		"hpa": {map[string]any{"extraDeploy": []any{map[string]any{"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
			"metadata": map[string]any{"name": "scaler"},
			"spec": map[string]any{"scaleTargetRef": map[string]any{"apiVersion": "apps/v1", "kind": "Deployment", "name": "payments"},
				"minReplicas": 1, "maxReplicas": 1}}}},
			[]string{`HorizontalPodAutoscaler "scaler"`, `spec.scaleTargetRef names the Deployment "payments"`, "Deployment.apps/payments"}},
	}
	for name, a := range attacks {
		if err := author.Create(ctx, crtest.NewCR(gvk, ns, name, a.spec)); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}
	for name, a := range attacks {
		u := crtest.WaitCondition(t, k8s, gvk, ns, name, "Stalled", metav1.ConditionTrue, "ChartInvalid", 2*time.Minute)
		msg := crtest.Condition(u, "Stalled").Message
		for _, p := range a.want {
			if !strings.Contains(msg, p) {
				t.Errorf("%s: Stalled does not name %q: %s", name, p, msg)
			}
		}
		crtest.WaitEvent(t, k8s, ns, name, "ChartInvalid", a.want[0])
		if h := helmtest.History(t, cluster.Kubeconfig, ns, name); len(h) != 0 {
			t.Errorf("%s: a refused release stored %d revisions", name, len(h))
		}
		// Nothing of it applied: not even the chart's own objects.
		if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: name + "-webapp"}, &corev1.Service{}); !apierrors.IsNotFound(err) {
			t.Errorf("%s: its Service exists (%v)", name, err)
		}
	}
	for name, o := range map[string]client.Object{"helper-admin": &rbacv1.RoleBinding{}, "helper": &corev1.ServiceAccount{}, "helper-token": &corev1.Secret{}} {
		if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, o); !apierrors.IsNotFound(err) {
			t.Errorf("%T %s exists (%v)", o, name, err)
		}
	}
	var hpas autoscalingv2.HorizontalPodAutoscalerList
	if err := k8s.List(ctx, &hpas, client.InNamespace(ns)); err != nil || len(hpas.Items) != 0 {
		t.Errorf("HPAs in the namespace: %d (%v)", len(hpas.Items), err)
	}
	if err := k8s.Get(ctx, client.ObjectKeyFromObject(payments), payments); err != nil || *payments.Spec.Replicas != 3 {
		t.Errorf("the payments Deployment: %v replicas (%v), want 3", payments.Spec.Replicas, err)
	}

	// A Secret that says it is meant for one CR may be named by that CR alone.
	shared := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "shared-db",
		Annotations: map[string]string{guard.AnnotationValuesFor: guard.ClaimRef(gvk.GroupKind(), "claimed")}},
		StringData: map[string]string{"password": "shared"}}
	if err := k8s.Create(ctx, shared); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"claimed", "unclaimed"} {
		if err := author.Create(ctx, crtest.NewCR(gvk, ns, name, map[string]any{"existingSecret": "shared-db"})); err != nil {
			t.Fatal(err)
		}
	}
	crtest.WaitCondition(t, k8s, gvk, ns, "claimed", "Ready", metav1.ConditionTrue, "", 2*time.Minute)
	crtest.WaitCondition(t, k8s, gvk, ns, "unclaimed", "Stalled", metav1.ConditionTrue, "ChartInvalid", 2*time.Minute)

	stolenToken(t, s, author)
}

// stolenToken: a release makes a ServiceAccount and its token Secret (both its own, which the
// identity rules allow), then an environment variable of its Deployment with what a lookup of
// the token returns (through tpl, as extraEnvVars are rendered). The lookup reads as not
// found: no render reads a token, whoever made it.
func stolenToken(t *testing.T, s scaffolded, author client.Client) {
	t.Helper()
	ctx := context.Background()
	gvk, ns := s.gvk, s.ns
	own := []any{
		map[string]any{"apiVersion": "v1", "kind": "ServiceAccount", "metadata": map[string]any{"name": "own"}},
		map[string]any{"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/service-account-token",
			"metadata": map[string]any{"name": "own-token", "annotations": map[string]any{"kubernetes.io/service-account.name": "own"}}},
	}
	if err := author.Create(ctx, crtest.NewCR(gvk, ns, "thief", map[string]any{"extraDeploy": own})); err != nil {
		t.Fatal(err)
	}
	crtest.WaitCondition(t, k8s, gvk, ns, "thief", "Ready", metav1.ConditionTrue, "", 2*time.Minute)
	crtest.Eventually(t, "the token controller fills own-token", time.Minute, func(ctx context.Context) (bool, error) {
		var tok corev1.Secret
		err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "own-token"}, &tok)
		return err == nil && len(tok.Data["token"]) > 0, client.IgnoreNotFound(err)
	})
	cr := crtest.MustGet(t, author, gvk, ns, "thief")
	steal := []any{map[string]any{"name": "STOLEN", "value": `{{ dig "data" "token" "none" (lookup "v1" "Secret" .Release.Namespace "own-token") }}`}}
	if err := unstructured.SetNestedSlice(cr.Object, steal, "spec", "extraEnvVars"); err != nil {
		t.Fatal(err)
	}
	if err := author.Update(ctx, cr); err != nil {
		t.Fatal(err)
	}
	crtest.WaitEvent(t, k8s, ns, "thief", "LookupWithheld", "own-token", "a ServiceAccount token")
	crtest.Eventually(t, "revision 2 applied", 2*time.Minute, func(ctx context.Context) (bool, error) {
		var d appsv1.Deployment
		if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "thief-webapp"}, &d); err != nil {
			return false, err
		}
		for _, e := range d.Spec.Template.Spec.Containers[0].Env {
			if e.Name == "STOLEN" {
				if e.Value != "none" {
					t.Fatalf("the render read the token: %q", e.Value)
				}
				return true, nil
			}
		}
		return false, nil
	})
}
