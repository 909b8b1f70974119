package helm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/metadata"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rudder-operator/rudder/internal/guard"
	"github.com/rudder-operator/rudder/internal/records"
)

// Taking existing objects into a release (a watch's install.takeOwnership): Helm 4's
// TakeOwnership adopts whatever exists under a rendered object's name, on the word of whoever
// writes the CR. rudder takes only an object outside any release that claims the CR itself
// (guard.AnnotationValuesFor naming it, written by someone who may write that object): it gets
// Helm's ownership metadata for the release and rudder's owner mark, with the resourceVersion
// it was read at, so that Helm's action imports it as its own and the guard lets the action
// write it. Any other existing object is left as it is, and the action refuses it as before.

// takeOwnership takes the claimed objects of req's render into its release when its watch
// says so (ApplyPolicy.TakeOwnership), recording them in req.Taken.
func (a *Actions) takeOwnership(ctx context.Context, req *Request) error {
	if !req.Scope.Apply.TakeOwnership {
		return nil
	}
	taken, err := a.takeClaimed(ctx, req)
	req.Taken = taken
	return err
}

// takeClaimed takes the objects of req's render that exist outside any release and claim its
// CR into its release, as the scope's identity within its confinement, and returns them.
func (a *Actions) takeClaimed(ctx context.Context, req *Request) ([]string, error) {
	c := a.core
	s := req.Scope
	claim := guard.ClaimRef(s.Owner.GVK.GroupKind(), s.Owner.Key.Name)
	objs, err := ParseIdentities(strings.Join(req.manifests, "\n---\n"), s.Namespace, c.mapper)
	if err != nil {
		return nil, err
	}
	read, err := c.metadataReader(s)
	if err != nil {
		return nil, err
	}
	var taken []string
	var w client.Client
	for _, id := range objs {
		live, err := read(ctx, id)
		switch {
		case apierrors.IsForbidden(err), errors.Is(err, errUnmapped), live == nil && err == nil:
			continue // Helm's action says what it may not read or does not know
		case err != nil:
			return taken, fmt.Errorf("reading %s: %w", Describe(id), err)
		}
		a := live.GetAnnotations()
		if a[helmReleaseName] != "" || a[records.AnnotationOwner] != "" || !guard.Claims(a[guard.AnnotationValuesFor], claim) {
			continue // a release's, or not claimed: Helm's action decides, as without the policy
		}
		if w == nil {
			if w, err = c.confinedWriter(ctx, s); err != nil {
				return taken, err
			}
		}
		err = markLive(ctx, w, id, live.GetResourceVersion(), map[string]any{helmManagedBy: "Helm", records.LabelManaged: "true"},
			map[string]any{helmReleaseName: req.ReleaseName, helmReleaseNamespace: s.Namespace, records.AnnotationOwner: guard.OwnerOf(s.Owner)})
		if err != nil {
			return taken, fmt.Errorf("taking %s into release %s: %w", Describe(id), req.ReleaseName, err)
		}
		taken = append(taken, Describe(id))
	}
	return taken, nil
}

// errUnmapped: the kind of an object to read is not one the mapper knows.
var errUnmapped = errors.New("no mapping")

// metadataReader reads the metadata of objects as the scope's identity: nil and no error for an
// object that does not exist, errUnmapped for one of a kind the mapper does not know.
func (c *core) metadataReader(s Scope) (func(ctx context.Context, id *unstructured.Unstructured) (*metav1.PartialObjectMetadata, error),
	error) {
	mc, err := metadata.NewForConfig(c.restConfig(s))
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context, id *unstructured.Unstructured) (*metav1.PartialObjectMetadata, error) {
		m, err := c.mapper.RESTMapping(id.GroupVersionKind().GroupKind(), id.GroupVersionKind().Version)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", errUnmapped, err)
		}
		live, err := mc.Resource(m.Resource).Namespace(id.GetNamespace()).Get(ctx, id.GetName(), metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return live, err
	}, nil
}

// markLive merge-patches the labels and annotations of the object id, on the condition that it
// is still at resourceVersion rv: what the object was when it was proven.
func markLive(ctx context.Context, w client.Client, id *unstructured.Unstructured, rv string, labels, annotations map[string]any) error {
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"resourceVersion": rv, "labels": labels, "annotations": annotations}})
	if err != nil {
		return err
	}
	target := &unstructured.Unstructured{}
	target.SetGroupVersionKind(id.GroupVersionKind())
	target.SetNamespace(id.GetNamespace())
	target.SetName(id.GetName())
	return w.Patch(ctx, target, client.RawPatch(types.MergePatchType, patch))
}

// confinedWriter writes as the scope's identity, held to its confinement but not to its
// ownership: what it writes is the owner's mark itself, on objects proven the owner's.
func (c *core) confinedWriter(ctx context.Context, s Scope) (client.Client, error) {
	hc, err := c.httpClient(s)
	if err != nil {
		return nil, err
	}
	g := guard.New(ctx, s.Confinement, c.mapper, c.prefix, "")
	return client.New(c.restConfig(s), client.Options{Scheme: c.scheme, Mapper: c.mapper,
		HTTPClient: &http.Client{Transport: g.Wrap(hc.Transport), Timeout: hc.Timeout}})
}
