package gate

import (
	"context"
	"sync"
	"time"

	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// A fair share of a kind's workers, by construction: the CRs waiting for a worker are handed
// out round robin over their namespaces, each namespace's in the order they came. While one
// namespace converges 1,500 CRs, a CR of another namespace that comes in is the next but one
// to be handed out, not the 1,501st; a namespace alone in the queue gets every worker, so a
// fleet of one namespace converges as fast as in one FIFO queue. Everything else about the
// queue is client-go's workqueue (one entry per CR, none handed to two workers at once, a CR
// changed while in a worker is queued again when it is done): only its storage is ours.

// NewQueue is a kind's work queue (controller-runtime's controller.Options.NewQueue):
// client-go's rate-limiting, delaying workqueue over storage that is fair among namespaces.
func NewQueue(name string, rl workqueue.TypedRateLimiter[reconcile.Request]) workqueue.TypedRateLimitingInterface[reconcile.Request] {
	base := workqueue.NewTypedWithConfig(workqueue.TypedQueueConfig[reconcile.Request]{Name: name, Queue: NewFairQueue(requestNamespace)})
	delaying := workqueue.NewTypedDelayingQueueWithConfig(workqueue.TypedDelayingQueueConfig[reconcile.Request]{Name: name, Queue: base})
	return workqueue.NewTypedRateLimitingQueueWithConfig(rl, workqueue.TypedRateLimitingQueueConfig[reconcile.Request]{Name: name,
		DelayingQueue: delaying})
}

// RateLimiter is the per-CR back-off of a kind's queue: controller-runtime's default for its
// queues (5 ms doubling to 1,000 s), without client-go's overall token bucket, which would
// pace a fleet's retries at 10 a second.
func RateLimiter() workqueue.TypedRateLimiter[reconcile.Request] {
	return workqueue.NewTypedItemExponentialFailureRateLimiter[reconcile.Request](5*time.Millisecond, 1000*time.Second)
}

func requestNamespace(r reconcile.Request) string { return r.Namespace }

// FairQueue is client-go workqueue storage (workqueue.Queue) that hands items out round robin
// over the groups key puts them in, each group's in the order they were pushed. client-go
// calls it under its queue's lock.
type FairQueue[T comparable] struct {
	key    func(T) string
	groups map[string][]T
	// ring is the groups with items, in the order of the round; next is the one to pop from.
	ring []string
	next int
	n    int
}

// NewFairQueue is an empty FairQueue whose groups key names.
func NewFairQueue[T comparable](key func(T) string) *FairQueue[T] {
	return &FairQueue[T]{key: key, groups: map[string][]T{}}
}

// Touch is called for an item pushed again while it waits: it keeps its place.
func (q *FairQueue[T]) Touch(T) {}

func (q *FairQueue[T]) Push(item T) {
	g := q.key(item)
	if len(q.groups[g]) == 0 {
		// A group joins the round just before the one whose turn it is: every group that
		// already waits goes once before it goes twice.
		q.ring = append(q.ring[:q.next], append([]string{g}, q.ring[q.next:]...)...)
		q.next++
		if q.next == len(q.ring) {
			q.next = 0
		}
	}
	q.groups[g] = append(q.groups[g], item)
	q.n++
}

func (q *FairQueue[T]) Len() int { return q.n }

// Pop hands out the oldest item of the group whose turn it is. client-go calls it only when
// Len is above zero.
func (q *FairQueue[T]) Pop() T {
	g := q.ring[q.next]
	items := q.groups[g]
	item := items[0]
	var zero T
	items[0] = zero // let what the item holds go
	q.n--
	if len(items) == 1 {
		delete(q.groups, g)
		q.ring = append(q.ring[:q.next], q.ring[q.next+1:]...)
	} else {
		q.groups[g] = items[1:]
		q.next++
	}
	if q.next >= len(q.ring) {
		q.next = 0
	}
	return item
}

// slots are a kind's active slots (maxConcurrentReconciles), handed to the passes waiting for
// one round robin over their namespaces, as the queue hands out CRs: the kind runs many more
// workers than slots (PoolSize), so that without it a CR of another namespace would wait
// behind every worker of a busy namespace that already holds a CR.
type slots struct {
	mu      sync.Mutex
	n, free int
	waiting *FairQueue[*waiter]
}

// waiter is a pass waiting for a slot: ready is closed when it has one; gone marks one that
// stopped waiting (its context ended), which a freed slot skips.
type waiter struct {
	namespace string
	ready     chan struct{}
	gone      bool
}

func newSlots(n int) *slots {
	return &slots{n: n, free: n, waiting: NewFairQueue(func(w *waiter) string { return w.namespace })}
}

// acquire waits for a slot for a pass of namespace ns, or for ctx to end.
func (s *slots) acquire(ctx context.Context, ns string) error {
	s.mu.Lock()
	if s.free > 0 && s.waiting.Len() == 0 {
		s.free--
		s.mu.Unlock()
		return nil
	}
	w := &waiter{namespace: ns, ready: make(chan struct{})}
	s.waiting.Push(w)
	s.mu.Unlock()
	select {
	case <-w.ready:
		return nil
	case <-ctx.Done():
	}
	s.mu.Lock()
	select {
	case <-w.ready: // handed a slot as the context ended: give it on
		s.mu.Unlock()
		s.release()
	default:
		w.gone = true
		s.mu.Unlock()
	}
	return ctx.Err()
}

// release gives a slot back: to the waiting pass whose namespace's turn it is, if any.
func (s *slots) release() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for s.waiting.Len() > 0 {
		if w := s.waiting.Pop(); !w.gone {
			close(w.ready)
			return
		}
	}
	s.free++
}

// taken is how many slots passes hold.
func (s *slots) taken() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.n - s.free
}

// waitingLen is how many passes wait, those that stopped waiting included.
func (s *slots) waitingLen() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.waiting.Len()
}
