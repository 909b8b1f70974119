package wiring

import (
	"context"
	"fmt"
	"strings"

	authorizationv1 "k8s.io/api/authorization/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rudder-operator/rudder/internal/machine"
)

// WatchAccess returns a check that rudder's own identity may list and watch a kind where its
// caches look (every namespace, or each of namespaces). A dependent watch on a kind it may not
// list would never sync and every read through it would wait forever; checked first, the pass
// fails instead with a message saying which rule the ClusterRole lacks.
func WatchAccess(c client.Client, mapper meta.RESTMapper, namespaces []string) func(context.Context, schema.GroupVersionKind) error {
	scopes := namespaces
	if len(scopes) == 0 {
		scopes = []string{""}
	}
	return func(ctx context.Context, gvk schema.GroupVersionKind) error {
		m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			return err
		}
		var denied []string
		for _, ns := range scopes {
			var verbs []string
			for _, verb := range []string{"list", "watch"} {
				r := &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{
					ResourceAttributes: &authorizationv1.ResourceAttributes{
						Namespace: ns, Verb: verb, Group: m.Resource.Group, Version: m.Resource.Version, Resource: m.Resource.Resource,
					},
				}}
				if err := c.Create(ctx, r); err != nil {
					return fmt.Errorf("checking access to %s: %w", m.Resource.GroupResource(), err)
				}
				if !r.Status.Allowed {
					verbs = append(verbs, verb)
				}
			}
			if len(verbs) == 0 {
				continue
			}
			where := "cluster-wide"
			if ns != "" {
				where = "in namespace " + ns
			}
			denied = append(denied, fmt.Sprintf("%s %s %s", strings.Join(verbs, "/"), m.Resource.GroupResource(), where))
		}
		if len(denied) > 0 {
			return &machine.AccessError{Denied: denied}
		}
		return nil
	}
}
