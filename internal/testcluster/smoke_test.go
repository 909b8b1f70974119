package testcluster_test

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"helm.sh/helm/v4/pkg/action"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	"helm.sh/helm/v4/pkg/cli"
	"helm.sh/helm/v4/pkg/kube"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rudder-operator/rudder/internal/crtest"
	"github.com/rudder-operator/rudder/internal/testcluster"
)

var (
	cluster *testcluster.Cluster
	k8s     client.Client
)

func TestMain(m *testing.M) {
	os.Exit(crtest.Main(m, crtest.Suite{Setup: func(e *crtest.Env) (func() error, error) {
		cluster, k8s = e.Cluster, e.Client
		return nil, nil
	}}))
}

func clientset(t *testing.T) *kubernetes.Clientset {
	t.Helper()
	cs, err := kubernetes.NewForConfig(cluster.Config)
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

func tool(t *testing.T, name string, args ...string) string {
	t.Helper()
	out, err := cluster.Command(name, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

func TestComponentsRunning(t *testing.T) {
	crtest.NeedsCluster(t)
	for _, c := range []string{"kube-controller-manager", "kube-scheduler", "kwok"} {
		if !cluster.Running(c) {
			t.Errorf("%s is not running", c)
		}
	}
}

func TestServerVersion(t *testing.T) {
	crtest.NeedsCluster(t)
	out := tool(t, "kubectl", "version", "-o", "json")
	if !strings.Contains(out, `"gitVersion": "v1.37.`) || strings.Count(out, `"gitVersion": "v1.37.`) < 2 {
		t.Fatalf("kubectl version does not report client and server v1.37.x:\n%s", out)
	}
	nodes := tool(t, "kubectl", "get", "nodes")
	if !strings.Contains(nodes, testcluster.NodeName) || !strings.Contains(nodes, " Ready ") {
		t.Fatalf("kwok node not Ready:\n%s", nodes)
	}
}

// TestDeploymentAvailable needs kube-controller-manager (ReplicaSet, Pods, status),
// kube-scheduler (binding) and kwok (Running, Ready).
func TestDeploymentAvailable(t *testing.T) {
	crtest.NeedsCluster(t)
	cs := clientset(t)
	ns := crtest.NewNamespace(t, k8s, "smoke-")
	labels := map[string]string{"app": "web"}
	dep := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns},
		Spec: appsv1.DeploymentSpec{
			Replicas: new(int32(2)),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "nginx"}}},
			},
		},
	}
	ctx := context.Background()
	if _, err := cs.AppsV1().Deployments(ns).Create(ctx, dep, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	crtest.Eventually(t, "2 available replicas", 60*time.Second, func(ctx context.Context) (bool, error) {
		d, err := cs.AppsV1().Deployments(ns).Get(ctx, "web", metav1.GetOptions{})
		return err == nil && d.Status.AvailableReplicas == 2 && d.Status.ReadyReplicas == 2, nil
	})
	pods, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=web"})
	if err != nil {
		t.Fatal(err)
	}
	if len(pods.Items) != 2 {
		t.Fatalf("want 2 pods, got %d", len(pods.Items))
	}
	for _, p := range pods.Items {
		if p.Spec.NodeName != testcluster.NodeName || p.Status.Phase != corev1.PodRunning {
			t.Errorf("pod %s: node %q phase %s", p.Name, p.Spec.NodeName, p.Status.Phase)
		}
	}

	// Garbage collection: deleting the Deployment removes its ReplicaSet and Pods.
	if err := cs.AppsV1().Deployments(ns).Delete(ctx, "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	crtest.Eventually(t, "dependents garbage-collected", 60*time.Second, func(ctx context.Context) (bool, error) {
		rs, err := cs.AppsV1().ReplicaSets(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		pods, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		return err == nil && len(rs.Items) == 0 && len(pods.Items) == 0, nil
	})
}

func TestRunToCompletionPodSucceeds(t *testing.T) {
	crtest.NeedsCluster(t)
	cs := clientset(t)
	ns := crtest.NewNamespace(t, k8s, "smoke-")
	ctx := context.Background()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "once", Namespace: ns},
		Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever,
			Containers: []corev1.Container{{Name: "c", Image: "busybox", Command: []string{"sh", "-c", "true"}}}},
	}
	if _, err := cs.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	crtest.Eventually(t, "pod Succeeded", 60*time.Second, func(ctx context.Context) (bool, error) {
		p, err := cs.CoreV1().Pods(ns).Get(ctx, "once", metav1.GetOptions{})
		return err == nil && p.Status.Phase == corev1.PodSucceeded, nil
	})

	// A chosen exit code fails the Pod (the stage the At tests use).
	pod.Name = "fails"
	pod.Annotations = map[string]string{"stage.rudder.dev/exit-code": "3"}
	if _, err := cs.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	crtest.Eventually(t, "pod Failed with exit code 3", 60*time.Second, func(ctx context.Context) (bool, error) {
		p, err := cs.CoreV1().Pods(ns).Get(ctx, "fails", metav1.GetOptions{})
		if err != nil || p.Status.Phase != corev1.PodFailed || len(p.Status.ContainerStatuses) == 0 {
			return false, nil
		}
		term := p.Status.ContainerStatuses[0].State.Terminated
		return term != nil && term.ExitCode == 3, nil
	})

	// Deleted Pods go away (kwok's pod-delete stage plays the kubelet).
	if err := cs.CoreV1().Pods(ns).Delete(ctx, "once", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	crtest.Eventually(t, "pod gone", 60*time.Second, func(ctx context.Context) (bool, error) {
		_, err := cs.CoreV1().Pods(ns).Get(ctx, "once", metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
}

// TestPodRequestingWhatChartsRequestRuns: the simulated node advertises the resources real
// charts request (common library charts' presets ask for ephemeral-storage), so such a Pod is
// scheduled and runs.
func TestPodRequestingWhatChartsRequestRuns(t *testing.T) {
	crtest.NeedsCluster(t)
	cs := clientset(t)
	ns := crtest.NewNamespace(t, k8s, "smoke-")
	ctx := context.Background()
	req := corev1.ResourceList{
		corev1.ResourceCPU: resource.MustParse("500m"), corev1.ResourceMemory: resource.MustParse("512Mi"),
		corev1.ResourceEphemeralStorage: resource.MustParse("2Gi"), "hugepages-2Mi": resource.MustParse("128Mi"),
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "preset", Namespace: ns},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox",
			Resources: corev1.ResourceRequirements{Requests: req, Limits: req}}}},
	}
	if _, err := cs.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	crtest.Eventually(t, "the Pod Running", 60*time.Second, func(ctx context.Context) (bool, error) {
		p, err := cs.CoreV1().Pods(ns).Get(ctx, "preset", metav1.GetOptions{})
		return err == nil && p.Status.Phase == corev1.PodRunning, err
	})
}

// TestHelmSDKReleaseVisibleToCLI installs through the SDK and reads it back with bin/helm.
func TestHelmSDKReleaseVisibleToCLI(t *testing.T) {
	ns := crtest.NewNamespace(t, k8s, "smoke-")
	settings := cli.New()
	settings.KubeConfig = cluster.Kubeconfig
	settings.SetNamespace(ns)
	cfg := action.NewConfiguration()
	if err := cfg.Init(settings.RESTClientGetter(), ns, "secret"); err != nil {
		t.Fatal(err)
	}
	ch, err := loader.Load("testdata/smokechart")
	if err != nil {
		t.Fatal(err)
	}
	in := action.NewInstall(cfg)
	in.ReleaseName, in.Namespace, in.WaitStrategy = "smoke", ns, kube.HookOnlyStrategy
	if _, err := in.Run(ch, map[string]any{"greeting": "hi"}); err != nil {
		t.Fatalf("install (kubeVersion >=1.23 must accept the server's version): %v", err)
	}
	out := tool(t, "helm", "history", "smoke", "-n", ns)
	if !strings.Contains(out, "deployed") || !strings.Contains(out, "smoke-0.1.0") {
		t.Fatalf("helm history:\n%s", out)
	}
	if vals := tool(t, "helm", "get", "values", "smoke", "-n", ns); !strings.Contains(vals, "greeting: hi") {
		t.Fatalf("helm get values:\n%s", vals)
	}
}
