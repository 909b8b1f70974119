package helm

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

	release "helm.sh/helm/v4/pkg/release/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/metadata"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rudder-operator/rudder/internal/guard"
	"github.com/rudder-operator/rudder/internal/libtext"
)

// Ownership as an action applies it beyond its Guard (internal/guard, ownership.go): the
// release's hooks marked as its own before Helm stores them, the hooks that would replace
// another's object refused before the action's first write, the kept hooks deleted with the
// release, and the CR that holds a cluster-scoped object named in an install's failure. Each
// reads the cluster as the action's identity.

// hookObjects are the objects of hooks (those of events, or every hook when events is empty),
// placed as Helm creates them.
func hookObjects(hooks []*release.Hook, namespace string, s *guard.Scoper, events ...release.HookEvent) []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	for _, h := range hooks {
		if len(events) > 0 && !hasEvent(h, events) {
			continue
		}
		_ = guard.EachObject([]byte(h.Manifest), func(obj *unstructured.Unstructured) error {
			namespaced, err := s.Namespaced(obj.GroupVersionKind())
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
func (r *run) ownedObjects(ctx context.Context, mapper meta.RESTMapper, objs []*unstructured.Unstructured) ([]liveObject,
	[]guard.Violation, error) {
	if len(objs) == 0 {
		return nil, nil, nil
	}
	mc, err := metadata.NewForConfig(r.config)
	if err != nil {
		return nil, nil, err
	}
	var owned []liveObject
	var vs []guard.Violation
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
		if why := guard.NotMadeBy(live.GetAnnotations(), r.guard.OwnerMark()); why != "" {
			vs = append(vs, guard.Violation{Source: guard.SourceHook, Kind: gvk.Kind, Name: o.GetName(), Namespace: o.GetNamespace(),
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
func (r *run) checkHookOwners(ctx context.Context, mapper meta.RESTMapper, s *guard.Scoper, rel *release.Release,
	events ...release.HookEvent) error {
	if r.guard.OwnerMark() == "" || len(rel.Hooks) == 0 {
		return nil
	}
	_, vs, err := r.ownedObjects(ctx, mapper, hookObjects(rel.Hooks, rel.Namespace, s, events...))
	if err != nil {
		return err
	}
	if len(vs) > 0 {
		return &guard.ConfinementError{Violations: vs}
	}
	return nil
}

// deleteKeptHooks deletes what the hooks of rel left behind (hooks without a delete policy
// that removes them, such as a migration Job kept for its logs), once the release is gone:
// only objects the release made, each by the UID read. Those in the owner's namespace have an
// owner reference too; this also reaches those elsewhere in the confinement.
func (r *run) deleteKeptHooks(ctx context.Context, mapper meta.RESTMapper, rel *release.Release) error {
	if r.guard.OwnerMark() == "" || len(rel.Hooks) == 0 {
		return nil
	}
	owned, _, err := r.ownedObjects(ctx, mapper, hookObjects(rel.Hooks, rel.Namespace, guard.NewScoper(mapper, nil)))
	if err != nil {
		return err
	}
	background := metav1.DeletePropagationBackground
	for _, o := range owned {
		uid := o.meta.GetUID()
		err := o.resource.Delete(ctx, o.meta.GetName(), metav1.DeleteOptions{PropagationPolicy: &background,
			Preconditions: &metav1.Preconditions{UID: &uid}})
		if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			return fmt.Errorf("deleting the kept hook %s/%s: %w", o.meta.GetObjectKind().GroupVersionKind().Kind, o.meta.GetName(), err)
		}
	}
	return nil
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
	return fmt.Errorf("%w; held by another release (a releaseName with the CR's namespace keeps each CR's own): %s", err, strings.Join(held,
		"; "))
}

// references resolves, as the run's identity, what the release's objects name and it does
// not make (guard.ReferenceReader): an object that exists and says it is meant for the
// release's CR (guard.AnnotationValuesFor), or that the release made in an earlier revision.
// What the identity may not read, or whose kind is not served, is not resolved.
func (r *run) references(ctx context.Context, mapper meta.RESTMapper) guard.ReferenceReader {
	claim := guard.ClaimRef(r.scope.Owner.GVK.GroupKind(), r.scope.Owner.Key.Name)
	var mc metadata.Interface
	return func(gk schema.GroupKind, ns, name string) (bool, error) {
		m, err := mapper.RESTMapping(gk)
		if err != nil {
			return false, nil
		}
		if mc == nil {
			if mc, err = metadata.NewForConfig(r.config); err != nil {
				return false, err
			}
		}
		live, err := mc.Resource(m.Resource).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err), apierrors.IsForbidden(err):
			return false, nil
		case err != nil:
			return false, fmt.Errorf("reading %s %s/%s, which the release names: %w", gk.Kind, ns, name, err)
		}
		a := live.GetAnnotations()
		owner := r.guard.OwnerMark()
		return (owner != "" && guard.NotMadeBy(a, owner) == "") || guard.Claims(a[guard.AnnotationValuesFor], claim), nil
	}
}

// beforeUninstall is what an uninstall of rel checks and does before Helm's: its delete hooks
// must be the release's, and its aggregating ClusterRoles give up their aggregation.
func (r *run) beforeUninstall(ctx context.Context, mapper meta.RESTMapper, rel *release.Release) error {
	if err := r.checkHookOwners(ctx, mapper, guard.NewScoper(mapper, nil), rel, release.HookPreDelete, release.HookPostDelete); err != nil {
		return err
	}
	if err := r.releaseAggregation(ctx, mapper, rel); err != nil {
		return r.result(err)
	}
	return nil
}

// releaseAggregation is the first step of an uninstall: every ClusterRole of rel's manifest
// that aggregates others' rules (an aggregationRule) and is the release's gives up its
// aggregationRule and its rules. kube-controller-manager's aggregation controller writes such
// a ClusterRole's rules by a server-side apply from its cache; deleted together with the roles
// it aggregates, it is re-created by an apply its cache still asked for (a ClusterRole of the
// release's name that no release owns). Once the ClusterRole aggregates nothing, the
// controller skips it: its informer sees this change before any deletion of the uninstall,
// since all ClusterRoles come in one ordered watch. A role that is not the release's is left
// to the uninstall, which refuses it.
func (r *run) releaseAggregation(ctx context.Context, mapper meta.RESTMapper, rel *release.Release) error {
	var aggregating []*unstructured.Unstructured
	err := guard.EachObject([]byte(rel.Manifest), func(o *unstructured.Unstructured) error {
		clusterRole := schema.GroupKind{Group: rbacv1.GroupName, Kind: "ClusterRole"}
		if o.GroupVersionKind().GroupKind() == clusterRole && o.Object["aggregationRule"] != nil {
			aggregating = append(aggregating, o)
		}
		return nil
	})
	if err != nil || len(aggregating) == 0 {
		return err
	}
	owned, _, err := r.ownedObjects(ctx, mapper, aggregating)
	if err != nil {
		return err
	}
	for _, o := range owned {
		// No rules, so that the API server's escalation check asks for nothing.
		patch := []byte(`{"aggregationRule":null,"rules":[]}`)
		if _, err := o.resource.Patch(ctx, o.meta.GetName(), types.MergePatchType, patch,
			metav1.PatchOptions{}); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("releasing the aggregation of ClusterRole %s before the uninstall: %w", o.meta.GetName(), err)
		}
	}
	return nil
}
