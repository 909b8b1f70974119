package controllers

import (
	"context"
	"errors"
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rudder-operator/rudder/internal/gate"
	"github.com/rudder-operator/rudder/internal/machine"
)

// The Reconciler as it is made (New), and the World its passes reach (machine.World): its
// options, and the doors the Reconciler keeps, each a view of it that lets a pass do one thing
// (the rollouts door is in rollout.go).

// dependentWatches starts the dependent watch of an operand kind (machine.Watches).
type dependentWatches struct{ r *Reconciler }

func (d dependentWatches) EnsureWatch(ctx context.Context, gvk schema.GroupVersionKind) error {
	return d.r.ensureWatch(ctx, gvk)
}

// statusWriter sends a pass's status patch (machine.StatusWriter), and keeps what it wrote
// for the passes that read a cache behind it (statuses.go).
type statusWriter struct{ r *Reconciler }

func (d statusWriter) PatchStatus(ctx context.Context, obj *unstructured.Unstructured, patch []byte) error {
	key := client.ObjectKeyFromObject(obj)
	// The pass is over: of the CR the API server sends back, only its metadata is read, but
	// for the first write of an inventory, which tells whether the schema keeps it.
	var res client.Object = metadataOf(d.r.gvk, key)
	_, probe, _ := unstructured.NestedFieldNoCopy(obj.Object, "status", "inventory")
	if probe = probe && d.r.inventory.Load() == inventoryUnknown; probe {
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(d.r.gvk)
		u.SetNamespace(key.Namespace)
		u.SetName(key.Name)
		res = u
	}
	if err := d.r.opts.Client.Status().Patch(ctx, res, client.RawPatch(types.MergePatchType, patch)); err != nil {
		return err
	}
	if probe {
		d.inventoryKept(res.(*unstructured.Unstructured))
	}
	d.r.statuses.wrote(key, obj.GetUID(), res.GetResourceVersion(), obj.Object["status"], obj.GetFinalizers())
	return nil
}

// What a kind's schema does with status.inventory, as the first write of one showed.
const (
	inventoryUnknown int32 = iota
	inventoryKept
	inventoryPruned
)

// KeepsInventory reports whether the kind's schema keeps status.inventory: a CRD made before
// rudder wrote it (as `rudder scaffold` wrote them before the field existed) prunes it, and
// every pass would write it again. Known from the first write of an inventory on, for as long as
// the process runs: a CRD updated to keep it is seen after a restart.
func (d statusWriter) KeepsInventory() bool { return d.r.inventory.Load() != inventoryPruned }

// inventoryKept records what the API server's answer to a write of an inventory, the CR
// written, says of the schema.
func (d statusWriter) inventoryKept(written *unstructured.Unstructured) {
	if _, kept, _ := unstructured.NestedFieldNoCopy(written.Object, "status", "inventory"); kept {
		d.r.inventory.Store(inventoryKept)
		return
	}
	d.r.inventory.Store(inventoryPruned)
	d.r.log.Info("the kind's schema drops status.inventory: no inventory is written; add it to the CRD (rudder scaffold writes it) "+
		"and restart rudder", "crd", d.r.gvk.GroupKind().String())
}

// New validates opts and returns a Reconciler; SetupWithManager starts it.
func New(opts Options) (*Reconciler, error) {
	switch {
	case opts.Watch == nil:
		return nil, errors.New("reconciler: Watch is required")
	case opts.Charts == nil:
		return nil, errors.New("reconciler: Charts is required")
	case opts.Helm.History == nil || opts.Helm.Actions == nil || opts.Helm.Owners == nil ||
		opts.Helm.Records == nil || opts.Helm.Objects == nil:
		return nil, errors.New("reconciler: Helm is required, each of its views")
	case opts.Client == nil || opts.APIReader == nil:
		return nil, errors.New("reconciler: Client and APIReader are required")
	case len(opts.Watch.ValuesFrom) > 0 && opts.Sources == nil:
		return nil, errors.New("reconciler: Sources is required for a watch with valuesFrom")
	}
	if _, ok := opts.Charts.Get(opts.Watch.ChartPath()); !ok {
		return nil, fmt.Errorf("reconciler: chart %s of %s was not added to the chart source", opts.Watch.ChartPath(), opts.Watch)
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	if opts.Recorder == nil {
		opts.Recorder = &events.FakeRecorder{}
	}
	r := &Reconciler{
		opts:     opts,
		gvk:      opts.Watch.GroupVersionKind(),
		log:      ctrl.Log.WithName("reconciler").WithValues("kind", opts.Watch.String()),
		memory:   machine.NewMemory(opts.Watch),
		watching: map[schema.GroupVersionKind]*watchStart{},
		statuses: newStatuses(opts.Clock),
		behind:   map[types.NamespacedName]string{},

		changedSources: map[types.NamespacedName]bool{},
		gate:           gate.New(opts.Watch.String(), workers(opts), opts.Watch.Limits.ActionsPerNamespace(workers(opts))),
	}
	r.world = r.newWorld()
	return r, nil
}

// newWorld is what the passes of r's watch reach: its options, and r behind the doors.
func (r *Reconciler) newWorld() *machine.World {
	w := &machine.World{Watch: r.opts.Watch, Charts: r.opts.Charts, Hooks: r.opts.Hooks, Sources: r.opts.Sources, Queue: r,
		Carried: r.opts.Carried, Shard: r.opts.Shard, DefaultServiceAccount: r.opts.DefaultServiceAccount, Period: r.reconcilePeriod(),
		Helm: r.opts.Helm, Clock: r.opts.Clock, Live: r.opts.APIReader, Mapper: r.opts.Client.RESTMapper(), Scheme: r.opts.Client.Scheme(),
		Recorder: r.opts.Recorder, Memory: r.memory,
		Turns: r.gate, Watches: dependentWatches{r}, Status: statusWriter{r}, Rollouts: rolloutReader{r}}
	if r.opts.Dependents != nil {
		w.Operands = r.opts.Dependents
	}
	return w
}
