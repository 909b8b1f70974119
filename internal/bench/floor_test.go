package bench_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	hrelease "helm.sh/helm/v4/pkg/release"
	"helm.sh/helm/v4/pkg/release/common"
	"helm.sh/helm/v4/pkg/storage/driver"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// plainGVK is a kind rudder does not watch.
var plainGVK = schema.GroupVersionKind{Group: "bench.rudder.dev", Version: "v1", Kind: "Plain"}

// floorRequests is one CR's share of the protocol floor: the requests rudder sends to converge
// one CR (and the user's create of the CR), prepared beforehand so that sending them costs the
// client next to nothing.
type floorRequests struct {
	cr                 *unstructured.Unstructured
	pending, deployed  *corev1.Secret
	deployment, svc    *unstructured.Unstructured
	event              *corev1.Event
	released, readyNow []byte // status merge patches
}

// prepareFloor renders and encodes everything for the floor run in namespace ns.
func prepareFloor(b *testing.B, ns string) []floorRequests {
	out := make([]floorRequests, fleet)
	// Helm's own driver encodes the records, into a fake clientset (no API call).
	fc := fake.NewClientset()
	d := driver.NewSecrets(fc.CoreV1().Secrets(ns))
	for i := range out {
		name := fmt.Sprintf("web-%03d", i)
		rel, objs := renderWeb(b, name, ns)
		key := fmt.Sprintf("sh.helm.release.v1.%s.v1", name)
		record := func(status common.Status, store func(string, hrelease.Releaser) error) *corev1.Secret {
			rel.Info.Status = status
			if err := store(key, rel); err != nil {
				b.Fatal(err)
			}
			s, err := fc.CoreV1().Secrets(ns).Get(context.Background(), key, metav1.GetOptions{})
			if err != nil {
				b.Fatal(err)
			}
			s.Namespace, s.ResourceVersion = ns, ""
			return s
		}
		pending := record(common.StatusPendingInstall, d.Create)
		deployed := record(common.StatusDeployed, d.Update)

		cr := newCR(plainGVK, ns, name)
		f := floorRequests{cr: cr, pending: pending, deployed: deployed}
		for _, o := range objs {
			if o.GetKind() == "Deployment" {
				f.deployment = o
			} else {
				f.svc = o
			}
		}
		f.event = &corev1.Event{
			ObjectMeta:     metav1.ObjectMeta{Namespace: ns, Name: name + ".install"},
			InvolvedObject: corev1.ObjectReference{APIVersion: plainGVK.GroupVersion().String(), Kind: plainGVK.Kind, Namespace: ns, Name: name},
			Reason:         "InstallSucceeded", Type: corev1.EventTypeNormal, Source: corev1.EventSource{Component: "rudder"},
			Message: "installed revision 1 of rudder install: generation 1, chart web-0.1.0@0123456789ab, values 0123456789ab",
		}
		now := time.Now().UTC().Format(time.RFC3339)
		cond := func(typ, status, reason, msg string) string {
			return fmt.Sprintf(`{"type":%q,"status":%q,"reason":%q,"message":%q,"lastTransitionTime":%q,"observedGeneration":1}`, typ, status, reason, msg, now)
		}
		f.released = []byte(`{"status":{"observedGeneration":1,"release":{"name":"` + name + `","revision":1,"chart":"web-0.1.0","chartDigest":"0123456789ab","valuesDigest":"0123456789abcdef"},"conditions":[` +
			cond("ChartReady", "True", "ChartLoaded", "chart web-0.1.0, digest 0123456789ab") + "," +
			cond("Released", "True", "InstallSucceeded", "installed revision 1") + "," +
			cond("Stalled", "False", "InstallSucceeded", "") + "," +
			cond("Ready", "False", "Progressing", "waiting for Deployment/"+ns+"/"+name+": not found; Service/"+ns+"/"+name+": not found") + "," +
			cond("Reconciling", "True", "Progressing", "waiting for Deployment/"+ns+"/"+name+": not found") + `]}}`)
		f.readyNow = []byte(`{"status":{"conditions":[` +
			cond("ChartReady", "True", "ChartLoaded", "chart web-0.1.0, digest 0123456789ab") + "," +
			cond("Released", "True", "InstallSucceeded", "installed revision 1") + "," +
			cond("Stalled", "False", "InstallSucceeded", "") + "," +
			cond("Ready", "True", "ObjectsReady", "revision 1: 2 objects ready") + "," +
			cond("Reconciling", "False", "ObjectsReady", "revision 1: 2 objects ready") + `]}}`)
		out[i] = f
	}
	return out
}

// protocolFloor sends, for each of the 300 CRs and with rudder's parallelism, the requests
// rudder needs to converge it — the CR's create, the finalizer, Helm's two storage writes, the
// two objects, the Event and the two status patches — with no controller in between. (Helm's
// check that the release name is free is answered from rudder's caches of release records,
// and its check that the objects do not exist by their creates: no request.) rudder cannot be faster than this; the difference
// is what rudder itself costs.
//
// RUDDER_BENCH_FLOOR_SKIP (comma-separated: finalizer, pending, event, progress) leaves
// requests out, to show what each part of the protocol costs.
func protocolFloor(b *testing.B, ns string, reqs []floorRequests) time.Duration {
	skip := map[string]bool{}
	for _, k := range strings.Split(os.Getenv("RUDDER_BENCH_FLOOR_SKIP"), ",") {
		skip[strings.TrimSpace(k)] = true
	}
	start := time.Now()
	err := parallel(len(reqs), func(ctx context.Context, i int) error {
		f := reqs[i]
		name := f.cr.GetName()
		cr := f.cr.DeepCopy()
		if err := k8s.Create(ctx, cr); err != nil {
			return err
		}
		if !skip["finalizer"] {
			if err := k8s.Patch(ctx, cr, client.RawPatch(types.MergePatchType,
				[]byte(`{"metadata":{"finalizers":["rudder.dev/uninstall-release"],"resourceVersion":"`+cr.GetResourceVersion()+`"}}`))); err != nil {
				return err
			}
		}
		deployed := f.deployed.DeepCopy()
		if !skip["pending"] {
			pending := f.pending.DeepCopy()
			if err := k8s.Create(ctx, pending); err != nil {
				return err
			}
			deployed.ResourceVersion = pending.ResourceVersion
		}
		for _, o := range []*unstructured.Unstructured{f.deployment.DeepCopy(), f.svc.DeepCopy()} {
			// What rudder's post-renderer adds.
			o.SetLabels(map[string]string{"rudder.dev/managed": "true"})
			o.SetAnnotations(map[string]string{"rudder.dev/owner": "Plain.bench.rudder.dev/" + ns + "/" + name})
			o.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: plainGVK.GroupVersion().String(), Kind: plainGVK.Kind,
				Name: name, UID: cr.GetUID(), BlockOwnerDeletion: new(true)}})
			if err := k8s.Create(ctx, o); err != nil {
				return err
			}
		}
		if skip["pending"] {
			if err := k8s.Create(ctx, deployed); err != nil {
				return err
			}
		} else if err := k8s.Update(ctx, deployed); err != nil {
			return err
		}
		if !skip["event"] {
			if err := k8s.Create(ctx, f.event.DeepCopy()); err != nil {
				return err
			}
		}
		if !skip["progress"] {
			if err := k8s.Status().Patch(ctx, cr, client.RawPatch(types.MergePatchType, f.released)); err != nil {
				return err
			}
		}
		return k8s.Status().Patch(ctx, cr, client.RawPatch(types.MergePatchType, f.readyNow))
	})
	if err != nil {
		b.Fatal(err)
	}
	return time.Since(start)
}

// releaseFloor removes the floor CRs' finalizers (nobody uninstalls anything for them), so that
// their namespace can go.
func releaseFloor(b *testing.B, reqs []floorRequests) {
	if err := parallel(len(reqs), func(ctx context.Context, i int) error {
		return k8s.Patch(ctx, reqs[i].cr.DeepCopy(), client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`)))
	}); err != nil {
		b.Fatal(err)
	}
}
