package controllers_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	rstatus "github.com/rudder-operator/rudder/api/status"
	"github.com/rudder-operator/rudder/internal/crtest"
	"github.com/rudder-operator/rudder/internal/helm"
	"github.com/rudder-operator/rudder/internal/helm/helmtest"
	"github.com/rudder-operator/rudder/internal/machine"
)

// TestHelmCLIsOnServerSideReleases: on a release of a watch that applies server-side (SSAProbe),
// Helm 4's and Helm 3's rollback and upgrade work with no flag and each sticks; a field
// another manager set stays through every one of them; drift made as kubectl makes it is
// still restored; and rudder upgrades from the CLIs' revisions when the spec changes. The
// release starts with its Deployment's fields held as an earlier rudder held them (field
// manager "rudder"), which rudder's drift check moves to "helm" first.
func TestHelmCLIsOnServerSideReleases(t *testing.T) {
	crtest.NeedsCluster(t)
	t.Parallel()
	ctx := context.Background()
	ns := crtest.NewNamespace(t, k8s, "ssa-cli-")
	create(t, crtest.NewCR(ssaProbeGVK, ns, "c", map[string]any{}))
	crtest.WaitCondition(t, k8s, ssaProbeGVK, ns, "c", rstatus.TypeReady, metav1.ConditionTrue, "", timeout)
	patch(t, ssaProbeGVK, ns, "c", `{"spec":{"image":"nginx:2"}}`)
	waitRevisionOf(t, ssaProbeGVK, ns, "c", 2, 0)
	dep := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "c"}}
	if err := k8s.Patch(ctx, dep, client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"annotations":{"team":"payments"}}}`)), client.FieldOwner("someone")); err != nil {
		t.Fatal(err)
	}

	// The fields as a rudder before this change held them; the drift check of the next pass
	// moves them, with no new revision.
	renameManager(t, ns, "c", helm.FieldManager, "rudder")
	patch(t, ssaProbeGVK, ns, "c", `{"metadata":{"annotations":{"`+machine.AnnotationReconcileAt+`":"fields"}}}`)
	crtest.Eventually(t, "the earlier rudder's fields moved to helm", timeout, func(context.Context) (bool, error) {
		d := deployment(t, ns, "c")
		return len(managerEntries(d, "rudder")) == 0 && len(managerEntries(d, helm.FieldManager)) == 1, nil
	})

	cli := func(bin string, args ...string) {
		t.Helper()
		if out, err := cluster.Command(bin, append(args, "-n", ns)...).CombinedOutput(); err != nil {
			t.Fatalf("%s %v: %v\n%s", bin, args, err, out)
		}
	}
	image := func(want string) {
		t.Helper()
		d := deployment(t, ns, "c")
		if got := d.Spec.Template.Spec.Containers[0].Image; got != want {
			t.Fatalf("image %s, want %s", got, want)
		}
		if d.Annotations["team"] != "payments" {
			t.Fatalf("another manager's annotation is gone: %v", d.Annotations)
		}
	}
	const chart = "testdata/charts/day2"
	cli("helm", "rollback", "c", "1")
	waitRevisionOf(t, ssaProbeGVK, ns, "c", 3, 1)
	image("nginx:1")
	// Helm's CLI renders without rudder's post-renderer: rudder marks the revision and its
	// objects as the CR's again, in place.
	cli("helm", "upgrade", "c", chart, "--reuse-values", "--set", "image=nginx:3")
	waitRevisionOf(t, ssaProbeGVK, ns, "c", 4, 0)
	image("nginx:3")
	crtest.WaitEvent(t, k8s, ns, "c", rstatus.ReasonAdopted, "revision 4, made without rudder (helm upgrade), marked as this CR's in place")
	crtest.WaitCondition(t, k8s, ssaProbeGVK, ns, "c", rstatus.TypeReleased, metav1.ConditionTrue, rstatus.ReasonManualRollback, timeout)
	if h := helmtest.History(t, cluster.Kubeconfig, ns, "c"); h[2].ApplyMethod != "ssa" || h[3].ApplyMethod != "ssa" {
		t.Fatalf("Helm 4's rollback and upgrade applied %q and %q, want ssa", h[2].ApplyMethod, h[3].ApplyMethod)
	}
	// Helm 3 knows no server-side apply: it patches, and its records say nothing of it.
	cli("helm3", "rollback", "c", "2")
	waitRevisionOf(t, ssaProbeGVK, ns, "c", 5, 2)
	image("nginx:2")
	cli("helm3", "upgrade", "c", chart, "--reuse-values", "--set", "image=nginx:4")
	waitRevisionOf(t, ssaProbeGVK, ns, "c", 6, 0)
	image("nginx:4")
	crtest.WaitEvent(t, k8s, ns, "c", rstatus.ReasonAdopted, "revision 6, made without rudder (helm upgrade), marked as this CR's in place")
	crtest.Eventually(t, "the Deployment marked and owned by the CR again", timeout, func(context.Context) (bool, error) {
		d := deployment(t, ns, "c")
		return d.Annotations["rudder.dev/owner"] != "" && len(d.OwnerReferences) == 1, nil
	})

	// Drift as kubectl makes it is restored to the CLI's revision, replicas (ignored) kept.
	hpaWrite(t, ns, "c")
	crtest.Eventually(t, "the image restored", timeout, func(context.Context) (bool, error) {
		return deployment(t, ns, "c").Spec.Template.Spec.Containers[0].Image == "nginx:4", nil
	})
	if d := deployment(t, ns, "c"); *d.Spec.Replicas != 3 {
		t.Errorf("replicas %d after the restore, want the HPA's 3", *d.Spec.Replicas)
	}

	// rudder upgrades from the CLI's revision when the spec changes.
	patch(t, ssaProbeGVK, ns, "c", `{"spec":{"image":"nginx:5"}}`)
	waitRevisionOf(t, ssaProbeGVK, ns, "c", 7, 0)
	image("nginx:5")
	h := helmtest.History(t, cluster.Kubeconfig, ns, "c")
	if !strings.HasPrefix(h[6].Info.Description, "rudder upgrade") {
		t.Fatalf("revision 7: %q, want rudder's upgrade", h[6].Info.Description)
	}
	if d := deployment(t, ns, "c"); len(managerEntries(d, "rudder")) != 0 || len(managerEntries(d, "someone")) != 1 {
		t.Fatalf("managedFields at the end: %v", d.ManagedFields)
	}
}

// renameManager renames the managedFields entries of manager from to to on Deployment ns/name.
func renameManager(t *testing.T, ns, name, from, to string) {
	t.Helper()
	d := deployment(t, ns, name)
	fields := d.ManagedFields
	for i := range fields {
		if fields[i].Manager == from {
			fields[i].Manager = to
		}
	}
	body, err := json.Marshal([]map[string]any{{"op": "replace", "path": "/metadata/managedFields", "value": fields}})
	if err != nil {
		t.Fatal(err)
	}
	if err := k8s.Patch(context.Background(), d, client.RawPatch(types.JSONPatchType, body)); err != nil {
		t.Fatal(err)
	}
	if got := managerEntries(deployment(t, ns, name), to); len(got) == 0 {
		t.Fatalf("no entries of %s after the rename", to)
	}
}
