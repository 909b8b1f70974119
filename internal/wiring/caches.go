package wiring

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/rudder-operator/rudder/internal/helm"
	"github.com/rudder-operator/rudder/internal/hook"
	"github.com/rudder-operator/rudder/internal/machine"
	"github.com/rudder-operator/rudder/internal/records"
	"github.com/rudder-operator/rudder/internal/render"
	"github.com/rudder-operator/rudder/internal/watches"
)

// The caches beside the manager's own: of the operands, and of the release records rudder did
// not make.

// foreignRecordsCache is the cache of the release records rudder did not make
// (records.ForeignRecords: Helm's, Flux's, another tool's) in the namespaces rudder serves, as
// metadata: with it beside the cache of rudder's own records, an install's check that its
// release name is free costs no request. nil for a shard, whose cache of rudder's records holds
// only the shard's: its installs check the name with Helm's LIST, as before.
func foreignRecordsCache(cfg *rest.Config, mgr manager.Manager, opts ManagerOptions, shard labels.Selector) (client.Reader, error) {
	if !shard.Empty() {
		return nil, nil
	}
	c, err := cache.New(cfg, cache.Options{
		Scheme: mgr.GetScheme(), Mapper: mgr.GetRESTMapper(), DefaultNamespaces: opts.cacheNamespaces(),
		DefaultTransform: machine.Compact,
		ByObject:         map[client.Object]cache.ByObject{records.ReleaseSecret(): {Label: records.ForeignRecords()}},
	})
	if err != nil {
		return nil, err
	}
	if err := records.IndexReleaseSecrets(context.Background(), c); err != nil {
		return nil, fmt.Errorf("indexing foreign release Secrets: %w", err)
	}
	return c, mgr.Add(c)
}

// dependentsCache is the one cache of operands (objects rudder rendered) that every watch
// with watchDependentResources shares; nil when none has it.
func dependentsCache(cfg *rest.Config, mgr manager.Manager, opts ManagerOptions, ws []*watches.Watch, shard labels.Selector) (cache.Cache,
	error) {
	for _, w := range ws {
		if !w.Policies().WatchesDependents() {
			continue
		}
		dependents, err := cache.New(cfg, cache.Options{
			Scheme: mgr.GetScheme(), Mapper: mgr.GetRESTMapper(), DefaultNamespaces: opts.cacheNamespaces(),
			DefaultTransform:     machine.OperandTransform(hooksReadOperands(ws, opts.Hooks), watches.JudgedKinds(ws)),
			DefaultLabelSelector: narrowed(labels.SelectorFromSet(labels.Set{records.LabelManaged: "true"}), shard),
		})
		if err != nil {
			return nil, err
		}
		return dependents, mgr.Add(dependents)
	}
	return nil, nil
}

// helmClient is the Helm client of every watch's releases, rendering on renderPool's pool,
// with the caches of release records (rudder's, and unless shard selects, the others').
func helmClient(cfg *rest.Config, mgr manager.Manager, opts ManagerOptions, shard labels.Selector) (*helm.Client, error) {
	pool, err := renderPool(opts)
	if err != nil {
		return nil, err
	}
	foreign, err := foreignRecordsCache(cfg, mgr, opts, shard)
	if err != nil {
		return nil, err
	}
	return helm.NewClient(helm.ClientOptions{Config: cfg, Mapper: mgr.GetRESTMapper(), Scheme: mgr.GetScheme(), Records: mgr.GetClient(),
		Foreign: foreign, Renderer: pool, Log: ctrl.Log})
}

// renderPool is the pool the releases render on: the process's shared one, or one of its own
// under opts' memory budget.
func renderPool(opts ManagerOptions) (*render.Pool, error) {
	if opts.RenderMemoryBudget == 0 {
		return render.Default()
	}
	return render.NewPool(render.Options{MemoryBudget: opts.RenderMemoryBudget})
}

// hooksReadOperands reports whether a post-release hook of a kind that watches its operands
// may read them (and so their status must be cached).
func hooksReadOperands(ws []*watches.Watch, hooks *hook.Registry) bool {
	for _, w := range ws {
		if w.Policies().WatchesDependents() && len(hooks.PostReleaseHooks(w.GroupVersionKind())) > 0 {
			return true
		}
	}
	return false
}
