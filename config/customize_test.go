package config_test

import (
	"context"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rudder-operator/rudder/internal/crtest"
	"github.com/rudder-operator/rudder/internal/helm/helmtest"
)

// What a platform team layers on public charts (docs/charts.md, "Customizing a public chart"):
// post-renderers, common metadata and health checks, each on a chart served as a kind by the
// scaffolded watches entry with the platform's fields added.

// TestCustomizingAPublicChart: a kustomize patch adds a toleration to ingress-nginx's
// controller Deployment and common metadata labels every object, hooks included; an image
// override moves grafana to a mirror. Both are on the live objects from the first revision,
// both are restored when edited by hand, without a new revision.
func TestCustomizingAPublicChart(t *testing.T) {
	crtest.NeedsCluster(t)
	deploy(t)
	public := filepath.Join(root, "config", "testdata", "public")
	t.Run("IngressNginx", func(t *testing.T) {
		t.Parallel()
		s := serveScaffolded(t, compatCase{kind: "IngressNginx", chart: filepath.Join(public, "ingress-nginx")}, func(w map[string]any) {
			w["postRenderers"] = []any{map[string]any{"kustomize": map[string]any{"patches": []any{map[string]any{
				"target": map[string]any{"kind": "Deployment"},
				"patch":  "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: any}\nspec:\n  template:\n    spec:\n      tolerations:\n      - {key: dedicated, operator: Equal, value: ingress, effect: NoSchedule}\n",
			}}}}}
			w["commonMetadata"] = map[string]any{"labels": map[string]any{"team": "platform"}, "annotations": map[string]any{"cost-centre": "42"}}
		})
		rel := readyRelease(t, s)
		if len(rel.hooks) == 0 {
			t.Fatal("ingress-nginx renders no hooks: the test needs its admission hooks")
		}
		for _, h := range rel.hooks {
			if !strings.Contains(h, "team: platform") || !strings.Contains(h, `cost-centre: "42"`) {
				t.Errorf("commonMetadata did not reach a hook:\n%s", h)
			}
		}
		dep := deploymentOf(t, rel, s.ns)
		hasToleration := func(d *appsv1.Deployment) bool {
			return slices.ContainsFunc(d.Spec.Template.Spec.Tolerations, func(t corev1.Toleration) bool { return t.Key == "dedicated" && t.Value == "ingress" })
		}
		if !hasToleration(dep) || dep.Labels["team"] != "platform" || dep.Annotations["cost-centre"] != "42" {
			t.Fatalf("the live Deployment lacks the patch or the common metadata: tolerations %v, labels %v", dep.Spec.Template.Spec.Tolerations, dep.Labels)
		}
		restoredByHand(t, s, rel, dep, func(d *appsv1.Deployment) { d.Spec.Template.Spec.Tolerations = nil }, hasToleration)
	})
	t.Run("Grafana", func(t *testing.T) {
		t.Parallel()
		const mirror = "mirror.example.com/grafana/grafana"
		s := serveScaffolded(t, compatCase{kind: "Grafana", chart: filepath.Join(public, "grafana")}, func(w map[string]any) {
			w["postRenderers"] = []any{map[string]any{"kustomize": map[string]any{"images": []any{map[string]any{
				"name": "docker.io/grafana/grafana", "newName": mirror}}}}}
		})
		rel := readyRelease(t, s)
		dep := deploymentOf(t, rel, s.ns)
		mirrored := func(d *appsv1.Deployment) bool {
			return slices.ContainsFunc(d.Spec.Template.Spec.Containers, func(c corev1.Container) bool { return strings.HasPrefix(c.Image, mirror+":") })
		}
		if !mirrored(dep) {
			t.Fatalf("the live Deployment does not run the mirror's image: %v", dep.Spec.Template.Spec.Containers)
		}
		restoredByHand(t, s, rel, dep, func(d *appsv1.Deployment) {
			for i, c := range d.Spec.Template.Spec.Containers {
				d.Spec.Template.Spec.Containers[i].Image = strings.Replace(c.Image, mirror, "docker.io/grafana/grafana", 1)
			}
		}, mirrored)
	})
}

// readied is a CR's release once the CR is Ready: its name, manifest and hooks' manifests.
type readied struct {
	name, manifest string
	hooks          []string
}

// readyRelease waits until s's CR is Ready and its release has the one revision.
func readyRelease(t *testing.T, s scaffolded) readied {
	t.Helper()
	crtest.WaitCondition(t, k8s, s.gvk, s.ns, s.name, "Ready", metav1.ConditionTrue, "", 3*time.Minute)
	name, err := s.ws[0].ReleaseNameOf(crtest.MustGet(t, k8s, s.gvk, s.ns, s.name))
	if err != nil {
		t.Fatal(err)
	}
	h := helmtest.History(t, cluster.Kubeconfig, s.ns, name)
	if len(h) != 1 {
		t.Fatalf("history has %d revisions, want 1", len(h))
	}
	r := readied{name: name, manifest: h[0].Manifest}
	for _, hk := range h[0].Hooks {
		r.hooks = append(r.hooks, hk.Manifest)
	}
	return r
}

// deploymentOf is the live Deployment of a release (its first).
func deploymentOf(t *testing.T, rel readied, ns string) *appsv1.Deployment {
	t.Helper()
	for _, o := range releaseObjects(t, rel.manifest, ns) {
		if o.GetKind() == "Deployment" {
			var d appsv1.Deployment
			if err := k8s.Get(context.Background(), client.ObjectKeyFromObject(o), &d); err != nil {
				t.Fatal(err)
			}
			return &d
		}
	}
	t.Fatalf("release %s has no Deployment", rel.name)
	return nil
}

// restoredByHand undoes what a post-renderer did to a live Deployment, as someone editing it
// by hand would, and waits until rudder has restored it (has holds again), with no new
// revision.
func restoredByHand(t *testing.T, s scaffolded, rel readied, dep *appsv1.Deployment, undo func(*appsv1.Deployment), has func(*appsv1.Deployment) bool) {
	t.Helper()
	ctx := context.Background()
	edited := dep.DeepCopy()
	undo(edited)
	if err := k8s.Update(ctx, edited); err != nil {
		t.Fatal(err)
	}
	crtest.Eventually(t, "the post-renderer's change restored on the live Deployment", 2*time.Minute, func(ctx context.Context) (bool, error) {
		var d appsv1.Deployment
		err := k8s.Get(ctx, client.ObjectKeyFromObject(dep), &d)
		return err == nil && has(&d), err
	})
	if h := helmtest.History(t, cluster.Kubeconfig, s.ns, rel.name); len(h) != 1 {
		t.Fatalf("restoring made revisions: history has %d, want 1", len(h))
	}
}

var databaseGVK = schema.GroupVersionKind{Group: "phased.rudder.dev", Version: "v1", Kind: "Database"}

// TestHealthChecksAndRefusedPatches, on a chart whose Database kstatus would call Current at
// once: the CR is Ready only when the watch's CEL expression says the Database is, and its
// failed expression shows in Ready, naming the object and the expression. On the same watch, a
// patch that moves an object to another namespace is refused as a chart that does, and a
// patch that does not apply stalls its CR naming the patch and its target; the other CRs of
// the kind are served. Changing the watch's common metadata upgrades the release once.
func TestHealthChecksAndRefusedPatches(t *testing.T) {
	crtest.NeedsCluster(t)
	deploy(t)
	ctx := context.Background()
	s := serveScaffolded(t, compatCase{kind: "Phased", chart: filepath.Join(root, "config", "testdata", "charts", "phased")}, func(w map[string]any) {
		w["healthChecks"] = []any{map[string]any{"apiVersion": "phased.rudder.dev/v1", "kind": "Database",
			"current": "status.phase == 'Running'", "failed": "status.phase == 'Failed'"}}
		w["postRenderers"] = []any{map[string]any{"kustomize": map[string]any{"patches": []any{
			map[string]any{"target": map[string]any{"kind": "ConfigMap", "name": "mover-settings"},
				"patch": `[{"op": "add", "path": "/metadata/namespace", "value": "kube-system"}]`},
			map[string]any{"target": map[string]any{"kind": "ConfigMap", "name": "broken-settings"},
				"patch": `[{"op": "test", "path": "/data/size", "value": "not the size"}]`},
		}}}}
	})
	// Not Ready while the Database has no phase, though kstatus would call it Current.
	passes.Passes(t, k8s, s.gvk, s.ns, s.name, 2)
	if c := crtest.Condition(crtest.MustGet(t, k8s, s.gvk, s.ns, s.name), "Ready"); c == nil || c.Status == metav1.ConditionTrue {
		t.Fatalf("Ready before the health check says so: %+v", c)
	}
	setPhase(t, s.ns, s.name, "Running")
	crtest.WaitCondition(t, k8s, s.gvk, s.ns, s.name, "Ready", metav1.ConditionTrue, "", time.Minute)
	setPhase(t, s.ns, s.name, "Failed")
	u := crtest.WaitCondition(t, k8s, s.gvk, s.ns, s.name, "Ready", metav1.ConditionFalse, "ObjectFailed", time.Minute)
	msg := crtest.Condition(u, "Ready").Message
	for _, part := range []string{"Database/" + s.ns + "/" + s.name, "failed (status.phase == 'Failed') is true"} {
		if !strings.Contains(msg, part) {
			t.Errorf("Ready does not name %q: %s", part, msg)
		}
	}

	// The Database CRD is the sample's release's; these two do not make it again.
	for _, name := range []string{"mover", "broken"} {
		if err := k8s.Create(ctx, crtest.NewCR(s.gvk, s.ns, name, map[string]any{"installCRDs": false})); err != nil {
			t.Fatal(err)
		}
	}
	u = crtest.WaitCondition(t, k8s, s.gvk, s.ns, "mover", "Stalled", metav1.ConditionTrue, "ChartInvalid", time.Minute)
	if msg := crtest.Condition(u, "Stalled").Message; !strings.Contains(msg, "mover-settings") || !strings.Contains(msg, "kube-system") {
		t.Errorf("Stalled does not name the moved object and its namespace: %s", msg)
	}
	u = crtest.WaitCondition(t, k8s, s.gvk, s.ns, "broken", "Stalled", metav1.ConditionTrue, "PostRenderFailed", time.Minute)
	if msg := crtest.Condition(u, "Stalled").Message; !strings.Contains(msg, "postRenderers[0].kustomize.patches[1] (target ConfigMap/broken-settings)") {
		t.Errorf("Stalled does not name the patch and its target: %s", msg)
	}
	crtest.WaitEvent(t, k8s, s.ns, "broken", "PostRenderFailed", "patches[1]")
	var moved corev1.ConfigMap
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: "kube-system", Name: "mover-settings"}, &moved); err == nil {
		t.Error("the patch moved a ConfigMap into kube-system")
	}
	for _, name := range []string{"mover", "broken"} {
		if h := helmtest.History(t, cluster.Kubeconfig, s.ns, name); len(h) != 0 {
			t.Errorf("%s: a refused render made %d revisions", name, len(h))
		}
	}

	// A new watches.yaml with common metadata upgrades the release once, hooks' objects and
	// all, and no more while idle.
	setPhase(t, s.ns, s.name, "Running")
	crtest.WaitCondition(t, k8s, s.gvk, s.ns, s.name, "Ready", metav1.ConditionTrue, "", time.Minute)
	s.restart(t, func(w map[string]any) { w["commonMetadata"] = map[string]any{"labels": map[string]any{"team": "data"}} })
	crtest.Eventually(t, "revision 2, its Database labelled", time.Minute, func(ctx context.Context) (bool, error) {
		db, err := crtest.Get(ctx, k8s, databaseGVK, s.ns, s.name)
		return err == nil && db.GetLabels()["team"] == "data" && len(helmtest.History(t, cluster.Kubeconfig, s.ns, s.name)) == 2, err
	})
	crtest.WaitCondition(t, k8s, s.gvk, s.ns, s.name, "Ready", metav1.ConditionTrue, "", time.Minute)
	passes.Passes(t, k8s, s.gvk, s.ns, s.name, 2)
	if h := helmtest.History(t, cluster.Kubeconfig, s.ns, s.name); len(h) != 2 {
		t.Fatalf("changing commonMetadata: history has %d revisions, want 2", len(h))
	}
}

// setPhase writes a Database's status.phase, as its controller would.
func setPhase(t *testing.T, ns, name, phase string) {
	t.Helper()
	u := crtest.MustGet(t, k8s, databaseGVK, ns, name)
	if err := unstructured.SetNestedField(u.Object, phase, "status", "phase"); err != nil {
		t.Fatal(err)
	}
	if err := k8s.Status().Update(context.Background(), u); err != nil {
		t.Fatal(err)
	}
}
