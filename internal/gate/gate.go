// Package gate shares a kind's work out: passes at once, and Helm action slots per namespace
// (see Gate).
package gate

import (
	"context"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// Gate shares a kind's work out so that CRs whose Helm actions wait (a hook Job that never
// completes, a Pod no node takes) cannot hold up the CRs of other namespaces:
//
//   - active bounds the passes doing work at once (the kind's maxConcurrentReconciles), and
//     hands its slots to the waiting passes round robin over namespaces (fair.go). A pass
//     still running after waitingAfter is waiting on the cluster, not working: it gives its
//     slot back, so a pass of another CR starts at most waitingAfter after it was due.
//   - perNamespace bounds the passes of one namespace in a Helm action at once, waiting ones
//     included (limits.maxActionsPerNamespace). Another CR of that namespace that needs an
//     action is requeued to wait its turn, holding nothing.
//   - controller-runtime runs more workers than active slots (poolSize), so that waiting passes
//     do not exhaust the pool: it takes poolSize/perNamespace namespaces full of waiting CRs
//     to do so, and each action waits at most limits.actionTimeout.
//
// It also cancels the action of a CR that is being deleted, so that deleting a wedged CR
// uninstalls it at once instead of after its action's timeout.
type Gate struct {
	active       *slots
	perNamespace int
	waitingAfter time.Duration

	mu      sync.Mutex
	acting  map[string]int
	running map[types.NamespacedName]context.CancelFunc
	// queued are the CRs waiting for an action slot of their namespace, counted by namespace
	// in rudder_actions_queued{gvk} (gvk is the kind's label).
	queued      map[types.NamespacedName]bool
	queuedPerNS map[string]int
	gvk         string
}

// poolFactor is how many controller-runtime workers there are per active slot.
const poolFactor = 16

// defaultWaitingAfter is how long a pass runs before it counts as waiting.
const defaultWaitingAfter = 2 * time.Second

// New is the gate of a kind (gvk its metric label) with workers active slots and perNamespace
// action slots per namespace.
func New(gvk string, workers, perNamespace int) *Gate {
	return &Gate{active: newSlots(workers), perNamespace: perNamespace, waitingAfter: defaultWaitingAfter,
		acting: map[string]int{}, running: map[types.NamespacedName]context.CancelFunc{},
		queued: map[types.NamespacedName]bool{}, queuedPerNS: map[string]int{}, gvk: gvk}
}

// PoolSize is the number of controller-runtime workers for a gate of workers active slots.
func PoolSize(workers int) int { return max(workers*poolFactor, 32) }

// Enter waits for an active slot for the pass of key and returns its context, cancelled when
// the CR is deleted (cancel) or the pass ends (leave).
func (g *Gate) Enter(ctx context.Context, key types.NamespacedName) (context.Context, func(), error) {
	if err := g.active.acquire(ctx, key.Namespace); err != nil {
		return nil, nil, err
	}
	var once sync.Once
	release := func() { once.Do(g.active.release) }
	t := time.AfterFunc(g.waitingAfter, release)
	ctx, cancel := context.WithCancel(ctx)
	g.mu.Lock()
	g.running[key] = cancel
	g.mu.Unlock()
	return ctx, func() {
		t.Stop()
		release()
		cancel()
		g.mu.Lock()
		delete(g.running, key)
		g.mu.Unlock()
	}, nil
}

// Cancel ends the action of the running pass of key, if any.
func (g *Gate) Cancel(key types.NamespacedName) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if c, ok := g.running[key]; ok {
		c()
	}
}

// StartAction takes one of the action slots of key's namespace for key's pass; false when
// they are all taken, and key counts as queued until it takes one or dequeue says it no
// longer waits. The caller gives the slot back with endAction.
func (g *Gate) StartAction(key types.NamespacedName) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.acting[key.Namespace] >= g.perNamespace {
		g.setQueued(key, true)
		return false
	}
	g.setQueued(key, false)
	g.acting[key.Namespace]++
	return true
}

// dequeue: key no longer waits for an action slot (its pass needed none).
func (g *Gate) Dequeue(key types.NamespacedName) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.setQueued(key, false)
}

func (g *Gate) setQueued(key types.NamespacedName, queued bool) {
	if g.queued[key] == queued {
		return
	}
	ns := key.Namespace
	if queued {
		g.queued[key] = true
		g.queuedPerNS[ns]++
	} else {
		delete(g.queued, key)
		g.queuedPerNS[ns]--
	}
	if n := g.queuedPerNS[ns]; n > 0 {
		actionsQueued.WithLabelValues(g.gvk, ns).Set(float64(n))
	} else {
		delete(g.queuedPerNS, ns)
		actionsQueued.DeleteLabelValues(g.gvk, ns)
	}
}

func (g *Gate) EndAction(ns string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.acting[ns]--; g.acting[ns] <= 0 {
		delete(g.acting, ns)
	}
}

// TurnRequeue is when a CR whose namespace had no action slot free looks again.
const TurnRequeue = 2 * time.Second

// PerNamespace is how many action slots each namespace has.
func (g *Gate) PerNamespace() int { return g.perNamespace }

var actionsQueued = prometheus.NewGaugeVec(prometheus.GaugeOpts{
	Name: "rudder_actions_queued",
	Help: "CRs waiting for one of their namespace's Helm action slots (limits.maxActionsPerNamespace), by kind and namespace.",
}, []string{"gvk", "namespace"})

func init() { metrics.Registry.MustRegister(actionsQueued) }
