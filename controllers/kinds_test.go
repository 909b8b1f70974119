package controllers_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	appv1 "github.com/rudder-operator/rudder/api/apps/v1"
	cnatv1alpha1 "github.com/rudder-operator/rudder/api/cnat/v1alpha1"
	operatorv1alpha1 "github.com/rudder-operator/rudder/api/operator/v1alpha1"
	"github.com/rudder-operator/rudder/internal/crtest"
)

var (
	nginxGVK = operatorv1alpha1.GroupVersion.WithKind("NginxOperator")
	atGVK    = cnatv1alpha1.GroupVersion.WithKind("At")
	appGVK   = appv1.GroupVersion.WithKind("Application")
)

func applySample(t *testing.T, file string) {
	t.Helper()
	out, err := kubectl(t, "apply", "-f", filepath.Join(root, "config/samples", file))
	if err != nil {
		t.Fatalf("kubectl apply %s: %v\n%s", file, err, out)
	}
}

func TestNginxOperatorSample(t *testing.T) {
	crtest.NeedsCluster(t)
	t.Parallel()
	ctx := context.Background()
	applySample(t, "nginx-operator-system.yaml")
	applySample(t, "operator_v1alpha1_nginxoperator.yaml")
	const ns, name = "nginx-operator-system", "nginxoperator-sample"
	crtest.WaitCondition(t, k8s, nginxGVK, ns, name, "Ready", metav1.ConditionTrue, "", 90*time.Second)
	var dep appsv1.Deployment
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &dep); err != nil {
		t.Fatal(err)
	}
	if dep.Status.ReadyReplicas != 3 || dep.Spec.Template.Spec.Containers[0].Ports[0].ContainerPort != 8082 {
		t.Fatalf("deployment: ready %d, port %d", dep.Status.ReadyReplicas, dep.Spec.Template.Spec.Containers[0].Ports[0].ContainerPort)
	}
	hash0 := templateHash(t, ns, name)

	// replicas: 5 scales without a new Pod template.
	patch(t, nginxGVK, ns, name, `{"spec":{"replicas":5}}`)
	crtest.WaitCondition(t, k8s, nginxGVK, ns, name, "Ready", metav1.ConditionTrue, "", 90*time.Second)
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &dep); err != nil {
		t.Fatal(err)
	}
	if dep.Status.ReadyReplicas != 5 || templateHash(t, ns, name) != hash0 {
		t.Fatalf("scale: ready %d, template %s → %s", dep.Status.ReadyReplicas, hash0, templateHash(t, ns, name))
	}

	// forceRedeploy rolls the Pods (a new template) with nothing else changed.
	patch(t, nginxGVK, ns, name, `{"spec":{"forceRedeploy":"2026-11-29T10:00:00Z"}}`)
	crtest.WaitCondition(t, k8s, nginxGVK, ns, name, "Ready", metav1.ConditionTrue, "", 90*time.Second)
	if h := templateHash(t, ns, name); h == hash0 {
		t.Fatal("forceRedeploy did not change the Pod template")
	}
	crtest.Eventually(t, "rollout to 5 new pods", 90*time.Second, func(ctx context.Context) (bool, error) {
		if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &dep); err != nil {
			return false, err
		}
		return dep.Status.UpdatedReplicas == 5 && dep.Status.ReadyReplicas == 5 && dep.Status.Replicas == 5, nil
	})
}

func templateHash(t *testing.T, ns, name string) string {
	t.Helper()
	var dep appsv1.Deployment
	if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, &dep); err != nil {
		t.Fatal(err)
	}
	var rsl appsv1.ReplicaSetList
	if err := k8s.List(context.Background(), &rsl, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	rev := dep.Annotations["deployment.kubernetes.io/revision"]
	for _, rs := range rsl.Items {
		if rs.Annotations["deployment.kubernetes.io/revision"] == rev {
			return rs.Labels["pod-template-hash"]
		}
	}
	return "rev" + rev
}

func patch(t *testing.T, gvk schema.GroupVersionKind, ns, name, body string) {
	t.Helper()
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(gvk)
	u.SetNamespace(ns)
	u.SetName(name)
	if err := k8s.Patch(context.Background(), u, client.RawPatch(types.MergePatchType, []byte(body))); err != nil {
		t.Fatal(err)
	}
}

func TestAtSampleRunsOnce(t *testing.T) {
	crtest.NeedsCluster(t)
	ctx := context.Background()
	applySample(t, "cnat_v1alpha1_at.yaml")
	crtest.Eventually(t, "at-sample DONE", 90*time.Second, func(ctx context.Context) (bool, error) {
		u, err := crtest.Get(ctx, k8s, atGVK, "default", "at-sample")
		if err != nil {
			return false, err
		}
		phase, _, _ := unstructured.NestedString(u.Object, "status", "phase")
		return phase == cnatv1alpha1.PhaseDone, nil
	})
	var at cnatv1alpha1.At
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: "default", Name: "at-sample"}, &at); err != nil {
		t.Fatal(err)
	}
	s := at.Status
	if s.Succeeded == nil || !*s.Succeeded || s.ExitCode == nil || *s.ExitCode != 0 || s.StartTime == nil || s.FinishTime == nil {
		t.Fatalf("outcome not recorded: %+v", s)
	}
	var pod corev1.Pod
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: "default", Name: "at-sample"}, &pod); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(pod.Spec.Containers[0].Command, " "); got != "sh -c echo hello world!" {
		t.Fatalf("pod command = %q", got)
	}
	// DONE never re-runs: deleting the Pod does not bring it back.
	if err := k8s.Delete(ctx, &pod); err != nil {
		t.Fatal(err)
	}
	crtest.Eventually(t, "pod deleted", 30*time.Second, func(ctx context.Context) (bool, error) {
		err := k8s.Get(ctx, client.ObjectKey{Namespace: "default", Name: "at-sample"}, &corev1.Pod{})
		return apierrors.IsNotFound(err), nil
	})
	passes.Passes(t, k8s, atGVK, "default", "at-sample", 3)
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: "default", Name: "at-sample"}, &corev1.Pod{}); !apierrors.IsNotFound(err) {
		t.Fatalf("passes over a DONE At brought its pod back: %v", err)
	}
}

// An At whose schedule is an hour away waits: passes over it install nothing. Once the hooks'
// clock reaches the schedule, the next pass runs it.
func TestAtInTheFutureWaits(t *testing.T) {
	ctx := context.Background()
	ns := crtest.NewNamespace(t, k8s, "t-")
	when := hookClock.Now().Add(time.Hour).UTC().Truncate(time.Second)
	at := &cnatv1alpha1.At{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "later"},
		Spec:       cnatv1alpha1.AtSpec{Schedule: when.Format(time.RFC3339), Command: "date"},
	}
	if err := k8s.Create(ctx, at); err != nil {
		t.Fatal(err)
	}
	phase := func(ctx context.Context) (string, error) {
		var a cnatv1alpha1.At
		err := k8s.Get(ctx, client.ObjectKeyFromObject(at), &a)
		return a.Status.Phase, err
	}
	crtest.Eventually(t, "PENDING", 10*time.Second, func(ctx context.Context) (bool, error) {
		p, err := phase(ctx)
		return p == cnatv1alpha1.PhasePending, err
	})
	passes.Passes(t, k8s, atGVK, ns, "later", 3)
	if p, err := phase(ctx); err != nil || p != cnatv1alpha1.PhasePending {
		t.Fatalf("phase %q (%v) before the schedule", p, err)
	}
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "later"}, &corev1.Pod{}); !apierrors.IsNotFound(err) {
		t.Fatalf("pod exists before the schedule (err=%v)", err)
	}
	hookClock.Step(time.Hour)
	passes.Passes(t, k8s, atGVK, ns, "later", 1)
	crtest.Eventually(t, "DONE after the schedule", 60*time.Second, func(ctx context.Context) (bool, error) {
		if p, err := phase(ctx); err != nil || p != cnatv1alpha1.PhaseDone {
			return false, fmt.Errorf("phase %q (%w)", p, err)
		}
		return true, nil
	})
	var a cnatv1alpha1.At
	if err := k8s.Get(ctx, client.ObjectKeyFromObject(at), &a); err != nil {
		t.Fatal(err)
	}
	if a.Status.StartTime.Time.Before(when) {
		t.Fatalf("started at %s, before the schedule %s", a.Status.StartTime, when)
	}
}

func TestApplicationSample(t *testing.T) {
	crtest.NeedsCluster(t)
	t.Parallel()
	ctx := context.Background()
	applySample(t, "apps_v1_application.yaml")
	const ns, name = "default", "nginx-sample"
	crtest.WaitCondition(t, k8s, appGVK, ns, name, "Ready", metav1.ConditionTrue, "", 90*time.Second)
	var svc corev1.Service
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &svc); err != nil {
		t.Fatal(err)
	}
	if svc.Spec.Type != corev1.ServiceTypeNodePort || svc.Spec.Ports[0].NodePort != 30080 || svc.Spec.Selector["app"] != "nginx" {
		t.Fatalf("service: %+v", svc.Spec)
	}
	var dep appsv1.Deployment
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &dep); err != nil {
		t.Fatal(err)
	}
	if dep.Labels["app"] != "nginx" || dep.Spec.Template.Labels["app"] != "nginx" {
		t.Fatalf("labels: deployment %v, template %v", dep.Labels, dep.Spec.Template.Labels)
	}
	crtest.Eventually(t, "status mirrors the live objects", 60*time.Second, func(ctx context.Context) (bool, error) {
		var app appv1.Application
		if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &app); err != nil {
			return false, err
		}
		u, err := crtest.Get(ctx, k8s, appGVK, ns, name)
		if err != nil {
			return false, err
		}
		_, hasNetwork, _ := unstructured.NestedMap(u.Object, "status", "network")
		return app.Status.Workflow.ReadyReplicas == 1 && app.Status.Workflow.ObservedGeneration == dep.Generation && hasNetwork, nil
	})

	// A deleted Service is recreated.
	if err := k8s.Delete(ctx, &svc); err != nil {
		t.Fatal(err)
	}
	crtest.Eventually(t, "service recreated", 60*time.Second, func(ctx context.Context) (bool, error) {
		var s corev1.Service
		err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &s)
		return err == nil && s.UID != svc.UID, nil
	})
	// kubectl delete removes both.
	if out, err := kubectl(t, "delete", "application", name, "-n", ns, "--wait=true", "--timeout=60s"); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	crtest.Eventually(t, "deployment and service gone", 60*time.Second, func(ctx context.Context) (bool, error) {
		e1 := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &appsv1.Deployment{})
		e2 := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &corev1.Service{})
		return apierrors.IsNotFound(e1) && apierrors.IsNotFound(e2), nil
	})
}

func TestInvalidSpecsAreRejectedNamingTheField(t *testing.T) {
	t.Parallel()
	ns := crtest.NewNamespace(t, k8s, "t-")
	cases := []struct {
		name  string
		obj   client.Object
		field string // the API server's message must name it
	}{
		{"port 0", &operatorv1alpha1.NginxOperator{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "p0"},
			Spec: operatorv1alpha1.NginxOperatorSpec{Port: new(int32(0))}}, "spec.port"},
		{"negative replicas", &operatorv1alpha1.NginxOperator{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "r"},
			Spec: operatorv1alpha1.NginxOperatorSpec{Replicas: new(int32(-1))}}, "spec.replicas"},
		{"bad schedule", &cnatv1alpha1.At{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "s"},
			Spec: cnatv1alpha1.AtSpec{Schedule: "tomorrow at noon", Command: "true"}}, "spec.schedule"},
		{"empty command", &cnatv1alpha1.At{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "c"},
			Spec: cnatv1alpha1.AtSpec{Schedule: "2020-11-16T10:12:00Z"}}, "spec.command"},
		{"missing containers", &appv1.Application{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "a"},
			Spec: appv1.ApplicationSpec{Deployment: appsv1.DeploymentSpec{Selector: &metav1.LabelSelector{}}}},
			"spec.deployment.template.spec.containers"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := k8s.Create(context.Background(), tc.obj)
			if !apierrors.IsInvalid(err) {
				t.Fatalf("want Invalid, got %v", err)
			}
			if !strings.Contains(err.Error(), tc.field) {
				t.Fatalf("message does not name %s: %v", tc.field, err)
			}
		})
	}
}
