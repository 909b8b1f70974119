package machine

import (
	"context"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	rolloutv1 "github.com/rudder-operator/rudder/api/rollout/v1alpha1"
	"github.com/rudder-operator/rudder/internal/chartsource"
	"github.com/rudder-operator/rudder/internal/hook"
	"github.com/rudder-operator/rudder/internal/watches"
)

// World is all the passes of one watch reach beyond their CR: the watch and what serves it,
// read-only; the release boundary (Releases); readers of the caches and the API server; what
// the machine remembers between passes (Memory); and doors, each a small interface the
// controller implements, for what is not the machine's: the namespace's action slots, the
// dependent watches, the CR's status, the Rollouts. A pass reaches nothing else.
type World struct {
	Watch  *watches.Watch
	Charts *chartsource.Source
	Hooks  *hook.Registry
	// Sources reads the watch's valuesFrom sources (nil: it has none), for the CRs Queue takes
	// again when a source changes.
	Sources SourceReader
	Queue   SourceQueue
	// Carried are the labels a release carries from its CR (sharding); Shard names this
	// replica's rollouts ("": not sharded).
	Carried []string
	Shard   string
	// DefaultServiceAccount acts for the releases of a watch that names no serviceAccountName
	// ("": rudder's own identity); see helm.Scope.
	DefaultServiceAccount string
	// Period is how often every CR is passed again (0: only on events).
	Period time.Duration

	Helm  Releases
	Clock clock.PassiveClock
	// Live reads uncached, as rudder; Operands is the cache of operands (nil: the watch turns
	// watchDependentResources off, and operands are read live); Mapper maps kinds and Scheme
	// types them.
	Live     client.Reader
	Operands client.Reader
	Mapper   meta.RESTMapper
	Scheme   *runtime.Scheme
	Recorder events.EventRecorder
	Memory   *Memory

	Turns    Turns
	Watches  Watches
	Status   StatusWriter
	Rollouts Rollouts
	// Dependencies reads the CRs a CR depends on (nil: no watch has dependsOn).
	Dependencies Dependencies
}

// Dependencies reads the CRs of watched kinds that CRs depend on (watches.DependsOn), from the
// cache of CRs.
type Dependencies interface {
	// Get reads dep (nil, nil: there is none).
	Get(ctx context.Context, dep watches.Dependency) (*unstructured.Unstructured, error)
	// Of is what obj, a CR of a watched kind, depends on as its own watch says (nil: nothing;
	// an error: what obj's own pass reports).
	Of(obj *unstructured.Unstructured) ([]watches.Dependency, error)
	// Behind says why dep, a CR rudder serves, is not on the chart its kind has now ("": it
	// is): after a chart edit, its upgrade comes before those of the CRs that depend on it.
	Behind(dep *unstructured.Unstructured) string
}

// Turns are the namespace's action slots (internal/gate's Gate): a pass acts on its release
// only while it holds one.
type Turns interface {
	// StartAction takes a slot for key, or queues key for one (false).
	StartAction(key types.NamespacedName) bool
	EndAction(namespace string)
	// Dequeue drops key's place in the queue.
	Dequeue(key types.NamespacedName)
	PerNamespace() int
}

// Watches starts the dependent watch of an operand kind, so that a change of such an object
// takes its CR again.
type Watches interface {
	EnsureWatch(ctx context.Context, gvk schema.GroupVersionKind) error
}

// StatusWriter sends the merge patch of a CR's status a pass made; obj holds the status it
// patched to.
type StatusWriter interface {
	PatchStatus(ctx context.Context, obj *unstructured.Unstructured, patch []byte) error
	// KeepsInventory reports whether the kind's schema keeps status.inventory: true until a
	// write showed that the API server prunes it (a CRD made before rudder wrote it).
	KeepsInventory() bool
}

// Rollouts reads a Rollout by name (nil, nil: there is none yet), as the cache shows it or as
// the coordinator last wrote it.
type Rollouts interface {
	Rollout(ctx context.Context, name string) (*rolloutv1.Rollout, error)
}

// label is the watch's name on every metric (Watch.String).
func (w *World) label() string { return w.Watch.String() }

// gvk is the kind of the watch's CRs.
func (w *World) gvk() schema.GroupVersionKind { return w.Watch.GroupVersionKind() }

// rolloutName is the name of the Rollout that moves the watch's CRs (of this shard) to chart
// digest to.
func (w *World) rolloutName(to string) string { return rolloutv1.Name(w.gvk(), w.Shard, to) }

// operand is the object the operand cache (or, without one, the API server) holds of want,
// as the cache keeps it (see OperandTransform), for reading only.
func (w *World) operand(ctx context.Context, want *unstructured.Unstructured) (client.Object, error) {
	key := client.ObjectKeyFromObject(want)
	if w.Operands == nil {
		live := &unstructured.Unstructured{}
		live.SetGroupVersionKind(want.GroupVersionKind())
		return live, w.Live.Get(ctx, key, live)
	}
	live := OperandObject(want.GroupVersionKind())
	return live, w.Operands.Get(ctx, key, live, client.UnsafeDisableDeepCopy)
}

// reader is what the Go hooks read operands through: the operand cache, or the API server.
func (w *World) reader() client.Reader {
	if w.Operands != nil {
		return operandReader{r: w.Operands, scheme: w.Scheme}
	}
	return w.Live
}
