package helm

import (
	"context"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/cli-runtime/pkg/resource"
)

// Helm's marks of the objects a release owns: an object that carries them is adopted by the
// release's install or upgrade instead of being refused as one that exists.
const (
	helmManagedBy        = "app.kubernetes.io/managed-by"
	helmReleaseName      = "meta.helm.sh/release-name"
	helmReleaseNamespace = "meta.helm.sh/release-namespace"
)

// crdServedTimeout bounds the wait for a CustomResourceDefinition the release created to be
// served (the API server establishes one in well under a second).
const crdServedTimeout = time.Minute

// createOwnCRDs creates the CustomResourceDefinitions of the manifest the action's
// post-renderer wrote whose kinds other objects of the same manifest use and the API server
// does not serve yet, and waits until it serves them, so that Helm can build those objects.
// That is how operator charts ship CRDs in templates/ (behind an installCRDs value): Helm
// alone fails such an install, since it maps every object before it creates any. Each CRD is
// created as the post-renderer marked it, with Helm's ownership marks, and the request goes
// through the action's guard and identity; Helm's install or upgrade then adopts it into the
// release as its own. A manifest that is not the post-renderer's, or with no such CRD, is left
// to Helm.
func (k *kubeClient) createOwnCRDs(manifest string) error {
	objs := k.post.objectsOf(manifest)
	if objs == nil || len(k.post.crds) == 0 {
		return nil
	}
	used := map[schema.GroupKind]bool{}
	for _, o := range objs {
		used[(&unstructured.Unstructured{Object: o}).GroupVersionKind().GroupKind()] = true
	}
	for _, o := range k.post.crds {
		crd := &unstructured.Unstructured{Object: jsonCopy(o).(map[string]any)}
		d, _ := Defined(crd)
		gk := d.GroupKind
		if !used[gk] || k.serves(gk) {
			continue
		}
		if err := k.createCRD(crd); err != nil {
			return fmt.Errorf("creating CustomResourceDefinition %q before the objects of its kind %s: %w", crd.GetName(), gk, err)
		}
		err := wait.PollUntilContextTimeout(context.Background(), 200*time.Millisecond, crdServedTimeout, true, func(context.Context) (bool, error) {
			return k.serves(gk), nil
		})
		if err != nil {
			return fmt.Errorf("CustomResourceDefinition %q: kind %s not served after %s: %w", crd.GetName(), gk, crdServedTimeout, err)
		}
	}
	return nil
}

// serves reports whether the API server serves a kind (at any version).
func (k *kubeClient) serves(gk schema.GroupKind) bool {
	_, err := k.getter.mapper.RESTMapping(gk)
	return err == nil
}

// createCRD creates a CustomResourceDefinition of the release with Helm's ownership marks; one
// that exists already is left for Helm's adoption check to accept or refuse.
func (k *kubeClient) createCRD(crd *unstructured.Unstructured) error {
	labels := crd.GetLabels()
	if labels == nil {
		labels = map[string]string{}
	}
	labels[helmManagedBy] = "Helm"
	crd.SetLabels(labels)
	ann := crd.GetAnnotations()
	if ann == nil {
		ann = map[string]string{}
	}
	ann[helmReleaseName] = k.post.release
	ann[helmReleaseNamespace] = k.getter.namespace
	crd.SetAnnotations(ann)
	mapping, err := k.getter.mapper.RESTMapping(CRDKind.GroupKind(), CRDKind.Version)
	if err != nil {
		return err
	}
	client, err := k.restClient(CRDKind.GroupVersion())
	if err != nil {
		return err
	}
	_, err = resource.NewHelper(client, mapping).Create("", false, crd)
	if apierrors.IsAlreadyExists(err) {
		return nil
	}
	return err
}
