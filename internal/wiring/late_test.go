package wiring

import (
	"context"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache/informertest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rudder-operator/rudder/controllers"
)

// TestKindCachesRoute: reads of a watched kind that is not served yet fail as for an unknown
// kind, and never reach the manager's cache; once served they go to the kind's own cache; other
// kinds stay in the manager's.
func TestKindCachesRoute(t *testing.T) {
	late := schema.GroupVersionKind{Group: "late.rudder.dev", Version: "v1", Kind: "Latecomer"}
	served := schema.GroupVersionKind{Group: "test.rudder.dev", Version: "v1", Kind: "Widget"}
	base := &informertest.FakeInformers{}
	k := newKindCaches(base, Scheme(), []schema.GroupVersionKind{late})

	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(late.GroupVersion().WithKind("LatecomerList"))
	if err := k.List(context.Background(), list); !meta.IsNoMatchError(err) {
		t.Fatalf("list of a late kind before it is served: %v, want a no-match error", err)
	}
	if c, err := k.route(controllers.CRObject(served)); err != nil || c != cache.Cache(base) {
		t.Fatalf("a served kind routed to %v, %v; want the manager's cache", c, err)
	}

	own := &informertest.FakeInformers{}
	k.mu.Lock()
	k.ctx = context.Background()
	k.mu.Unlock()
	err := k.serve(context.Background(), late, func() (cache.Cache, error) { return own, nil }, func() error {
		return k.IndexField(context.Background(), controllers.CRObject(late), "x", func(client.Object) []string { return nil })
	})
	if err != nil {
		t.Fatal(err)
	}
	if c, err := k.route(list); err != nil || c != cache.Cache(own) {
		t.Fatalf("a served late kind routed to %v, %v; want its own cache", c, err)
	}
}
