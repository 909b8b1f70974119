package helm

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v2"
	"helm.sh/helm/v3/pkg/release"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	apirequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/client-go/metadata"

	"github.com/rudder-operator/rudder/internal/libtext"
	"github.com/rudder-operator/rudder/internal/records"
)

// Ownership: inside its confinement, a release changes and deletes only what it made. What a
// release made carries its owner's AnnotationOwner: the post-renderer marks every manifest
// object, and the release's storage marks every hook (markHooks) before Helm stores or runs
// it. A CR's values cannot forge that mark for another CR (the post-renderer overwrites it),
// and objects made outside rudder do not carry it.
//
// The rule is enforced on requests, so that it holds whatever path of Helm's makes them: the
// guard lets an update, patch or delete of a named object through only after it has read the
// object (as the release's identity) and found it marked as the owner's, and it sends a delete
// with the UID it read as a precondition, so that the API server deletes that object or
// nothing. Before an action's first write, hooks whose kind and name exist and are not the
// release's are refused (checkHookOwners): Helm's default before-hook-creation policy would
// otherwise delete another's object and put the hook in its place.

// ownerOf is the value of AnnotationOwner that marks what a release of owner made.
func ownerOf(o Owner) string {
	if o.Key.Name == "" {
		return ""
	}
	return records.OwnerAnnotation(o.GVK.GroupKind(), o.Key)
}

// notMadeBy says why an object whose annotations are annotations was not made by the release
// whose AnnotationOwner is owner; "" when it was. The one decision of ownership: the guard and
// the checks before an action's first write both ask it.
func notMadeBy(annotations map[string]string, owner string) string {
	switch got := annotations[records.AnnotationOwner]; got {
	case owner:
		return ""
	case "":
		return fmt.Sprintf("it exists and was not made by this release (it has no %s annotation): a release changes and deletes only what it made", records.AnnotationOwner)
	default:
		return fmt.Sprintf("it exists and was not made by this release (annotation %s is %q, this release's is %q): a release changes and deletes only what it made", records.AnnotationOwner, got, owner)
	}
}

// mutates reports whether a request changes or deletes one named object.
func mutates(info *apirequest.RequestInfo) bool {
	if !info.IsResourceRequest || info.Name == "" {
		return false
	}
	switch info.Verb {
	case "update", "patch", "delete":
		return true
	}
	return false
}

// checkOwned reads the object a mutating request is about, through rt. It returns the
// violation when the object is not the release's, or the read's own answer when that failed
// (the caller hands it on); (nil, nil) lets the request go on (a delete now carries the
// object's UID as a precondition). An object that does not exist is left to the request,
// which fails on it.
func (g *guard) checkOwned(req *http.Request, rt http.RoundTripper, info *apirequest.RequestInfo) (*Violation, *http.Response, error) {
	get := req.Clone(req.Context())
	get.Method, get.Body, get.GetBody, get.ContentLength = http.MethodGet, nil, nil, 0
	get.URL.RawQuery = ""
	get.Header.Del("Content-Type")
	get.Header.Set("Accept", "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json")
	resp, err := rt.RoundTrip(get)
	if err != nil {
		return nil, nil, err
	}
	switch {
	case resp.StatusCode == http.StatusNotFound:
		drain(resp)
		return nil, nil, nil
	case resp.StatusCode != http.StatusOK:
		return nil, resp, nil
	}
	var live metav1.PartialObjectMetadata
	err = json.NewDecoder(io.LimitReader(resp.Body, 8<<20)).Decode(&live)
	drain(resp)
	if err != nil {
		return nil, nil, fmt.Errorf("reading %s before %s: %w", req.URL.Path, info.Verb, err)
	}
	if why := notMadeBy(live.GetAnnotations(), g.owner); why != "" {
		return &Violation{Source: SourceRequest, Verb: info.Verb, Kind: g.kindOf(gvrOf(info)).Kind, Name: info.Name,
			Namespace: info.Namespace, Why: why}, nil, nil
	}
	if info.Verb == "delete" {
		return nil, nil, withUIDPrecondition(req, live.GetUID())
	}
	return nil, nil, nil
}

func drain(resp *http.Response) {
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
	resp.Body.Close()
}

// withUIDPrecondition makes a delete request's body DeleteOptions that delete only the object
// of that UID.
func withUIDPrecondition(req *http.Request, uid types.UID) error {
	opts := map[string]any{}
	if req.Body != nil {
		b, err := io.ReadAll(req.Body)
		req.Body.Close()
		if err != nil {
			return err
		}
		if len(bytes.TrimSpace(b)) > 0 && strings.Contains(req.Header.Get("Content-Type"), "json") {
			if err := json.Unmarshal(b, &opts); err != nil {
				return fmt.Errorf("reading the options of a delete: %w", err)
			}
		}
	}
	opts["preconditions"] = map[string]any{"uid": string(uid)}
	b, err := json.Marshal(opts)
	if err != nil {
		return err
	}
	req.Body = io.NopCloser(bytes.NewReader(b))
	req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil }
	req.ContentLength = int64(len(b))
	req.Header.Set("Content-Type", "application/json")
	return nil
}

// hookMarker marks a release's hooks as the post-renderer marks its manifest.
type hookMarker struct {
	post *postRenderer
}

// markHooks gives every hook of rel the owner's labels, annotation and, in the owner's
// namespace, owner reference (so that deleting the CR removes the hooks that are kept). It is
// idempotent. A hook that does not parse is left as it is: the check refuses it.
func (m *hookMarker) markHooks(rel *release.Release) {
	if m == nil || rel == nil {
		return
	}
	ownerAnn := ownerOf(m.post.owner)
	for _, h := range rel.Hooks {
		var out bytes.Buffer
		err := eachObject([]byte(h.Manifest), func(obj *unstructured.Unstructured) error {
			namespaced, err := m.post.scoper.namespaced(obj.GroupVersionKind())
			if err != nil {
				return err
			}
			m.post.mark(obj, ownerAnn, namespaced)
			if out.Len() > 0 {
				out.WriteString("---\n")
			}
			return writeYAML(&out, obj.Object)
		})
		if err == nil && out.Len() > 0 {
			h.Manifest = out.String()
		}
	}
}

// hookObjects are the objects of hooks (those of events, or every hook when events is empty),
// placed as Helm creates them.
func hookObjects(hooks []*release.Hook, namespace string, s *scoper, events ...release.HookEvent) []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	for _, h := range hooks {
		if len(events) > 0 && !hasEvent(h, events) {
			continue
		}
		_ = eachObject([]byte(h.Manifest), func(obj *unstructured.Unstructured) error {
			namespaced, err := s.namespaced(obj.GroupVersionKind())
			if err != nil {
				return nil // refused by the check, or not served: nothing of it to find
			}
			ns := ""
			if namespaced {
				ns = obj.GetNamespace()
				if ns == "" {
					ns = namespace
				}
			}
			out = append(out, Identity(obj.GetAPIVersion(), obj.GetKind(), ns, obj.GetName()))
			return nil
		})
	}
	return out
}

func hasEvent(h *release.Hook, events []release.HookEvent) bool {
	return slices.ContainsFunc(h.Events, func(e release.HookEvent) bool { return slices.Contains(events, e) })
}

// liveObject is an object read as the run's identity, with the client that reaches it.
type liveObject struct {
	meta     *metav1.PartialObjectMetadata
	resource metadata.ResourceInterface
}

// ownedObjects reads objs as the run's identity and sorts them: those that exist and are the
// owner's, and the violations of those that exist and are not.
func (r *run) ownedObjects(ctx context.Context, mapper meta.RESTMapper, objs []*unstructured.Unstructured) ([]liveObject, []Violation, error) {
	if len(objs) == 0 {
		return nil, nil, nil
	}
	mc, err := metadata.NewForConfig(r.config)
	if err != nil {
		return nil, nil, err
	}
	var owned []liveObject
	var vs []Violation
	for _, o := range objs {
		gvk := o.GroupVersionKind()
		m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			continue // a kind not served (yet): no object of it exists
		}
		var ri metadata.ResourceInterface = mc.Resource(m.Resource)
		if o.GetNamespace() != "" {
			ri = mc.Resource(m.Resource).Namespace(o.GetNamespace())
		}
		live, err := ri.Get(ctx, o.GetName(), metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			continue
		case err != nil:
			return nil, nil, fmt.Errorf("reading %s: %w", Describe(o), err)
		}
		if why := notMadeBy(live.GetAnnotations(), r.guard.owner); why != "" {
			vs = append(vs, Violation{Source: SourceHook, Kind: gvk.Kind, Name: o.GetName(), Namespace: o.GetNamespace(),
				Why: why + "; a hook may not replace or delete what it did not make"})
			continue
		}
		live.SetGroupVersionKind(gvk)
		owned = append(owned, liveObject{meta: live, resource: ri})
	}
	return owned, vs, nil
}

// checkHookOwners refuses hooks (of events, or all) whose objects exist and are not the
// release's: the check before an action's first write.
func (r *run) checkHookOwners(ctx context.Context, mapper meta.RESTMapper, s *scoper, rel *release.Release, events ...release.HookEvent) error {
	if r.guard.owner == "" || len(rel.Hooks) == 0 {
		return nil
	}
	_, vs, err := r.ownedObjects(ctx, mapper, hookObjects(rel.Hooks, rel.Namespace, s, events...))
	if err != nil {
		return err
	}
	if len(vs) > 0 {
		return &ConfinementError{Violations: vs}
	}
	return nil
}

// deleteKeptHooks deletes what the hooks of rel left behind (hooks without a delete policy
// that removes them, such as a migration Job kept for its logs), once the release is gone:
// only objects the release made, each by the UID read. Those in the owner's namespace have an
// owner reference too; this also reaches those elsewhere in the confinement.
func (r *run) deleteKeptHooks(ctx context.Context, mapper meta.RESTMapper, rel *release.Release) error {
	if r.guard.owner == "" || len(rel.Hooks) == 0 {
		return nil
	}
	owned, _, err := r.ownedObjects(ctx, mapper, hookObjects(rel.Hooks, rel.Namespace, newScoper(mapper, nil)))
	if err != nil {
		return err
	}
	background := metav1.DeletePropagationBackground
	for _, o := range owned {
		uid := o.meta.GetUID()
		err := o.resource.Delete(ctx, o.meta.GetName(), metav1.DeleteOptions{PropagationPolicy: &background, Preconditions: &metav1.Preconditions{UID: &uid}})
		if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			return fmt.Errorf("deleting the kept hook %s/%s: %w", o.meta.GetObjectKind().GroupVersionKind().Kind, o.meta.GetName(), err)
		}
	}
	return nil
}

// writeYAML writes an object as the post-renderer writes the manifest's.
func writeYAML(out *bytes.Buffer, obj map[string]any) error {
	b, ok := appendYAML(out.AvailableBuffer(), obj)
	if !ok {
		var err error
		if b, err = yaml.Marshal(obj); err != nil {
			return err
		}
	}
	out.Write(b)
	return nil
}

func gvrOf(info *apirequest.RequestInfo) schema.GroupVersionResource {
	return schema.GroupVersionResource{Group: info.APIGroup, Version: info.APIVersion, Resource: info.Resource}
}

// heldBy adds to err, an install's or upgrade's failure on objects that exist, which CR's
// release holds each cluster-scoped one: charts name them after the release, so a CR of the
// same name in another namespace finds them taken, and its author must learn by whom.
func (r *run) heldBy(ctx context.Context, mapper meta.RESTMapper, err error) error {
	if err == nil || !libtext.HelmCannotImport(err) || r.kube.post == nil {
		return err
	}
	var cluster []*unstructured.Unstructured
	for _, id := range r.kube.post.identities {
		if id.GetNamespace() == "" {
			cluster = append(cluster, id)
		}
	}
	_, vs, verr := r.ownedObjects(ctx, mapper, cluster)
	if verr != nil || len(vs) == 0 {
		return err
	}
	held := make([]string, len(vs))
	for i, v := range vs {
		held[i] = v.Kind + " " + strconv.Quote(v.Name) + ": " + v.Why
	}
	return fmt.Errorf("%w; held by another release (a releaseName with the CR's namespace keeps each CR's own): %s", err, strings.Join(held, "; "))
}
