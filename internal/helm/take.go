package helm

import (
	"context"
	"encoding/json"
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
func (c *Client) takeOwnership(ctx context.Context, req *Request) error {
	if !req.Scope.Apply.TakeOwnership {
		return nil
	}
	taken, err := c.takeClaimed(ctx, req)
	req.Taken = taken
	return err
}

// takeClaimed takes the objects of req's render that exist outside any release and claim its
// CR into its release, as the scope's identity within its confinement, and returns them.
func (c *Client) takeClaimed(ctx context.Context, req *Request) ([]string, error) {
	s := req.Scope
	claim := guard.ClaimRef(s.Owner.GVK.GroupKind(), s.Owner.Key.Name)
	objs, err := ParseIdentities(strings.Join(req.manifests, "\n---\n"), s.Namespace, c.mapper)
	if err != nil {
		return nil, err
	}
	mc, err := metadata.NewForConfig(c.restConfig(s))
	if err != nil {
		return nil, err
	}
	var taken []string
	var w client.Client
	for _, id := range objs {
		m, err := c.mapper.RESTMapping(id.GroupVersionKind().GroupKind(), id.GroupVersionKind().Version)
		if err != nil {
			continue // Helm's action says what it does not know
		}
		live, err := mc.Resource(m.Resource).Namespace(id.GetNamespace()).Get(ctx, id.GetName(), metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err), apierrors.IsForbidden(err):
			continue
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
		patch, err := json.Marshal(map[string]any{"metadata": map[string]any{
			"resourceVersion": live.GetResourceVersion(),
			"labels":          map[string]any{helmManagedBy: "Helm", records.LabelManaged: "true"},
			"annotations": map[string]any{helmReleaseName: req.ReleaseName, helmReleaseNamespace: s.Namespace,
				records.AnnotationOwner: guard.OwnerOf(s.Owner)},
		}})
		if err != nil {
			return taken, err
		}
		target := &unstructured.Unstructured{}
		target.SetGroupVersionKind(id.GroupVersionKind())
		target.SetNamespace(id.GetNamespace())
		target.SetName(id.GetName())
		if err := w.Patch(ctx, target, client.RawPatch(types.MergePatchType, patch)); err != nil {
			return taken, fmt.Errorf("taking %s into release %s: %w", Describe(id), req.ReleaseName, err)
		}
		taken = append(taken, Describe(id))
	}
	return taken, nil
}

// confinedWriter writes as the scope's identity, held to its confinement but not to its
// ownership: what it writes is the owner's mark itself, on objects proven the owner's.
func (c *Client) confinedWriter(ctx context.Context, s Scope) (client.Client, error) {
	hc, err := c.httpClient(s)
	if err != nil {
		return nil, err
	}
	g := guard.New(ctx, s.Confinement, c.mapper, c.prefix, "")
	return client.New(c.restConfig(s), client.Options{Scheme: c.scheme, Mapper: c.mapper,
		HTTPClient: &http.Client{Transport: g.Wrap(hc.Transport), Timeout: hc.Timeout}})
}
