package hook

import (
	"context"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rudder-operator/rudder/internal/release"
)

// Decision is a PreRelease hook's verdict.
type Decision struct {
	// Hold keeps the release as it is this pass: no install, upgrade or drift correction.
	Hold bool
	// RequeueAfter asks for another pass after this long (0: only on the next event).
	RequeueAfter time.Duration
	// Reason and Message explain a hold on the Released condition (e.g. "Scheduled",
	// "runs at 10:12:00").
	Reason, Message string
}

// Proceed lets the release go ahead.
var Proceed = Decision{}

// PreRelease runs before the release is acted on. obj is the CR (its status may be edited in
// memory); values are the chart values it may edit. If the error is non-nil the Decision is
// ignored and the pass fails.
type PreRelease interface {
	PreRelease(ctx context.Context, obj *unstructured.Unstructured, values map[string]any) (Decision, error)
}

// PreReleaseFunc adapts a function to PreRelease.
type PreReleaseFunc func(ctx context.Context, obj *unstructured.Unstructured, values map[string]any) (Decision, error)

// PreRelease implements PreRelease.
func (f PreReleaseFunc) PreRelease(ctx context.Context, obj *unstructured.Unstructured, values map[string]any) (Decision, error) {
	return f(ctx, obj, values)
}

// Release is what a PostRelease hook learns of the release.
type Release struct {
	Name      string
	Namespace string
	Revision  int
	Status    release.Status
	// Objects are the objects of the release manifest (desired state, not live). Only their
	// identity (apiVersion, kind, namespace, name) is sure to be set: read the live objects
	// through the reader a hook is given.
	Objects []*unstructured.Unstructured
}

// PostRelease runs after the release is in the wanted state (also when a PreRelease hook held
// it, with the release as it is, or nil when there is none). It reads operands with c and edits
// obj's status in memory. c is the API server when the watch does not watch its dependents,
// else rudder's operand cache, which keeps each operand's metadata and status, not its spec.
// If the error is non-nil the pass fails; edits made before the error are still persisted.
// RequeueAfter asks for another pass (0: only on the next event).
type PostRelease interface {
	PostRelease(ctx context.Context, obj *unstructured.Unstructured, rel *Release, c client.Reader) (requeueAfter time.Duration, err error)
}

// PostReleaseFunc adapts a function to PostRelease.
type PostReleaseFunc func(ctx context.Context, obj *unstructured.Unstructured, rel *Release, c client.Reader) (time.Duration, error)

// PostRelease implements PostRelease.
func (f PostReleaseFunc) PostRelease(ctx context.Context, obj *unstructured.Unstructured, rel *Release, c client.Reader) (time.Duration,
	error) {
	return f(ctx, obj, rel, c)
}

// Registry maps GroupVersionKinds to their hooks. Fill it before the manager starts; it is read
// only afterwards.
type Registry struct {
	pre  map[schema.GroupVersionKind][]PreRelease
	post map[schema.GroupVersionKind][]PostRelease
}

// NewRegistry returns an empty Registry.
func NewRegistry() *Registry {
	return &Registry{pre: map[schema.GroupVersionKind][]PreRelease{}, post: map[schema.GroupVersionKind][]PostRelease{}}
}

// AddPreRelease registers h for gvk; hooks run in the order added.
func (r *Registry) AddPreRelease(gvk schema.GroupVersionKind, h PreRelease) {
	r.pre[gvk] = append(r.pre[gvk], h)
}

// AddPostRelease registers h for gvk; hooks run in the order added.
func (r *Registry) AddPostRelease(gvk schema.GroupVersionKind, h PostRelease) {
	r.post[gvk] = append(r.post[gvk], h)
}

// PreReleaseHooks of gvk.
func (r *Registry) PreReleaseHooks(gvk schema.GroupVersionKind) []PreRelease {
	if r == nil {
		return nil
	}
	return r.pre[gvk]
}

// PostReleaseHooks of gvk.
func (r *Registry) PostReleaseHooks(gvk schema.GroupVersionKind) []PostRelease {
	if r == nil {
		return nil
	}
	return r.post[gvk]
}
