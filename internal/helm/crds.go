package helm

import (
	"context"
	"fmt"
	"time"

	chart "helm.sh/helm/v4/pkg/chart/v2"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/cli-runtime/pkg/resource"
	"k8s.io/client-go/rest"

	"github.com/rudder-operator/rudder/internal/guard"
	"github.com/rudder-operator/rudder/internal/records"
)

// crdServedTimeout bounds the wait for a CustomResourceDefinition the release created to be
// served (the API server establishes one in well under a second).
const crdServedTimeout = time.Minute

// crdClient is the kube client's CustomResourceDefinitions: those a chart ships in crds/
// (applyCRDs) and those its templates make for kinds the same manifest uses (createOwnCRDs).
type crdClient struct{ k *kubeClient }

// createOwnCRDs creates the CustomResourceDefinitions of the manifest the action's
// post-renderer wrote whose kinds other objects of the same manifest use and the API server
// does not serve yet, and waits until it serves them, so that Helm can build those objects.
// That is how operator charts ship CRDs in templates/ (behind an installCRDs value): Helm
// alone fails such an install, since it maps every object before it creates any. Each CRD is
// created as the post-renderer marked it, with Helm's ownership marks, and the request goes
// through the action's guard and identity; Helm's install or upgrade then adopts it into the
// release as its own. The objects are the post-renderer's last Run's: Helm 4 stores them again
// in a text of its own (each document re-written, with a "# Source" line per file), which it
// builds first in an upgrade after the current revision's manifest; a manifest with no such
// CRD is left to Helm.
func (c crdClient) createOwnCRDs() error {
	k := c.k
	objs := k.post.objects
	if objs == nil || len(k.post.crds) == 0 {
		return nil
	}
	used := map[schema.GroupKind]bool{}
	for _, o := range objs {
		used[(&unstructured.Unstructured{Object: o}).GroupVersionKind().GroupKind()] = true
	}
	for _, o := range k.post.crds {
		crd := &unstructured.Unstructured{Object: jsonCopy(o).(map[string]any)}
		d, _ := guard.Defined(crd)
		gk := d.GroupKind
		if !used[gk] || c.serves(gk) {
			continue
		}
		if err := c.createCRD(crd); err != nil {
			return fmt.Errorf("creating CustomResourceDefinition %q before the objects of its kind %s: %w", crd.GetName(), gk, err)
		}
		err := wait.PollUntilContextTimeout(k.context(), 200*time.Millisecond, crdServedTimeout, true, func(context.Context) (bool, error) {
			return c.serves(gk), nil
		})
		if err != nil {
			return fmt.Errorf("CustomResourceDefinition %q: kind %s not served after %s: %w", crd.GetName(), gk, crdServedTimeout, err)
		}
	}
	return nil
}

// serves reports whether the API server serves a kind (at any version).
func (c crdClient) serves(gk schema.GroupKind) bool {
	k := c.k
	_, err := k.getter.mapper.RESTMapping(gk)
	return err == nil
}

// createCRD creates a CustomResourceDefinition of the release with Helm's ownership marks; one
// that exists already is left for Helm's adoption check to accept or refuse.
func (c crdClient) createCRD(crd *unstructured.Unstructured) error {
	k := c.k
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
	h, err := c.crdHelper()
	if err != nil {
		return err
	}
	_, err = h.Create("", false, crd)
	if apierrors.IsAlreadyExists(err) {
		return nil
	}
	return err
}

// crdHelper is the helper of CustomResourceDefinitions, with the action's client (its identity
// and guard).
func (c crdClient) crdHelper() (*resource.Helper, error) {
	k := c.k
	mapping, err := k.getter.mapper.RESTMapping(guard.CRDKind.GroupKind(), guard.CRDKind.Version)
	if err != nil {
		return nil, err
	}
	cfg, err := k.getter.ToRESTConfig()
	if err != nil {
		return nil, err
	}
	gv := guard.CRDKind.GroupVersion()
	cfg.ContentConfig = resource.UnstructuredPlusDefaultContentConfig()
	cfg.GroupVersion, cfg.APIPath = &gv, "/apis"
	client, err := rest.RESTClientFor(cfg)
	if err != nil {
		return nil, err
	}
	return resource.NewHelper(client, mapping), nil
}

// CRDMode is what an action does with the CustomResourceDefinitions of a chart's crds/.
type CRDMode string

// The CRD modes (a watch's crds.install and crds.upgrade, Flux's names).
const (
	// CRDsSkip leaves crds/ alone.
	CRDsSkip CRDMode = "Skip"
	// CRDsCreate creates those that do not exist (Helm's install).
	CRDsCreate CRDMode = "Create"
	// CRDsCreateReplace also replaces those the release made with the chart's, unless that
	// removes a stored version (CRDVersionError).
	CRDsCreateReplace CRDMode = "CreateReplace"
)

// CRDPolicy is what an install and an upgrade do with the chart's crds/.
type CRDPolicy struct {
	Install, Upgrade CRDMode
}

// CRDVersionError: replacing a CustomResourceDefinition would remove a version the API server
// lists in its status.storedVersions, in which objects may still be stored.
type CRDVersionError struct {
	CRD, Version string
}

func (e *CRDVersionError) Error() string {
	return fmt.Sprintf("CustomResourceDefinition %s: the chart's crds/ remove version %s, which its status.storedVersions lists (objects may "+
		"be stored as %s); not replaced: migrate those objects and drop %s from status.storedVersions first",
		e.CRD, e.Version, e.Version, e.Version)
}

// applyCRDs applies the chart's crds/ as mode says, as the action's identity and through its
// guard, before the action renders: each CRD that does not exist is created, marked as the
// release's (AnnotationOwner); with CRDsCreateReplace each that exists and the release made is
// replaced by the chart's, unless that removes a stored version. It waits until the API server
// serves what it applied, and returns what it did, one line per CRD ("created x", "replaced y",
// or why one was left).
func (c crdClient) applyCRDs(ch *chart.Chart, mode CRDMode, owner string) ([]string, error) {
	k := c.k
	if mode == CRDsSkip || mode == "" {
		return nil, nil
	}
	h, err := c.crdHelper()
	if err != nil {
		return nil, err
	}
	var did, applied []string
	for _, f := range ch.CRDObjects() {
		objs, err := ParseManifest(string(f.File.Data), "", k.getter.mapper)
		if err != nil {
			return nil, fmt.Errorf("crds/%s: %w", f.Filename, err)
		}
		for _, crd := range objs {
			changed, what, err := applyCRD(h, crd, mode, owner)
			if err != nil {
				return did, err
			}
			if what != "" {
				did = append(did, what)
			}
			if changed {
				applied = append(applied, crd.GetName())
			}
		}
	}
	for _, name := range applied {
		if err := waitEstablished(k.context(), h, name); err != nil {
			return did, err
		}
	}
	return did, nil
}

// applyCRD creates or replaces one CRD as mode says. It reports whether the CRD changed, and
// what it did ("created x", "replaced x", "left x: why"; "": nothing to say).
func applyCRD(h *resource.Helper, crd *unstructured.Unstructured, mode CRDMode, owner string) (bool, string, error) {
	name := crd.GetName()
	if owner != "" {
		ann := crd.GetAnnotations()
		if ann == nil {
			ann = map[string]string{}
		}
		ann[records.AnnotationOwner] = owner
		crd.SetAnnotations(ann)
	}
	obj, err := h.Get("", name)
	if apierrors.IsNotFound(err) {
		if _, err := h.Create("", false, crd); err != nil && !apierrors.IsAlreadyExists(err) {
			return false, "", fmt.Errorf("creating CustomResourceDefinition %s of crds/: %w", name, err)
		}
		return true, "created " + name, nil
	}
	if err != nil {
		return false, "", fmt.Errorf("reading CustomResourceDefinition %s of crds/: %w", name, err)
	}
	if mode != CRDsCreateReplace {
		return false, "", nil
	}
	live, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return false, "", fmt.Errorf("reading CustomResourceDefinition %s: unexpected %T", name, obj)
	}
	if why := guard.NotMadeBy(live.GetAnnotations(), owner); owner != "" && why != "" {
		return false, "left " + name + ": " + why, nil
	}
	if v := removedStoredVersion(live, crd); v != "" {
		return false, "", &CRDVersionError{CRD: name, Version: v}
	}
	crd.SetResourceVersion(live.GetResourceVersion())
	out, err := h.Replace("", name, false, crd)
	if err != nil {
		return false, "", fmt.Errorf("replacing CustomResourceDefinition %s of crds/: %w", name, err)
	}
	// The API server keeps the resourceVersion of an update that changes nothing.
	if m, err := meta.Accessor(out); err == nil && m.GetResourceVersion() == live.GetResourceVersion() {
		return false, "", nil
	}
	return true, "replaced " + name, nil
}

// removedStoredVersion is a version of live's status.storedVersions that crd does not have
// ("": none).
func removedStoredVersion(live, crd *unstructured.Unstructured) string {
	stored, _, _ := unstructured.NestedStringSlice(live.Object, "status", "storedVersions")
	versions, _, _ := unstructured.NestedSlice(crd.Object, "spec", "versions")
	has := map[string]bool{}
	for _, v := range versions {
		if m, ok := v.(map[string]any); ok {
			if n, ok := m["name"].(string); ok {
				has[n] = true
			}
		}
	}
	for _, v := range stored {
		if !has[v] {
			return v
		}
	}
	return ""
}

// waitEstablished waits until the API server has established the CRD name (serves its
// versions as the new spec has them).
func waitEstablished(ctx context.Context, h *resource.Helper, name string) error {
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, crdServedTimeout, true, func(context.Context) (bool, error) {
		obj, err := h.Get("", name)
		if err != nil {
			return false, nil //nolint:nilerr // looked at again until the timeout
		}
		u, ok := obj.(*unstructured.Unstructured)
		if !ok {
			return false, nil
		}
		conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
		for _, c := range conds {
			if m, ok := c.(map[string]any); ok && m["type"] == "Established" && m["status"] == "True" {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		return fmt.Errorf("CustomResourceDefinition %s of crds/ not established after %s: %w", name, crdServedTimeout, err)
	}
	return nil
}
