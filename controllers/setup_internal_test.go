package controllers

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"testing/synctest"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/rudder-operator/rudder/internal/machine"
	"github.com/rudder-operator/rudder/internal/records"
	"github.com/rudder-operator/rudder/internal/watches"
)

// While a dependent watch is being started, other passes needing the kind wait for the outcome
// (they must not read through a watch that is not there); a failed start is retried later.
func TestEnsureWatchSharesOneStart(t *testing.T) {
	// In a synctest bubble, synctest.Wait returns once every goroutine of the test is blocked:
	// the test waits for the callers to be waiting, not for time to pass.
	synctest.Test(t, testEnsureWatchSharesOneStart)
}

func testEnsureWatchSharesOneStart(t *testing.T) {
	gvk := schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}
	release := make(chan struct{})
	var checks, adds atomic.Int32
	allow := atomic.Bool{}
	r := &Reconciler{
		watching: map[schema.GroupVersionKind]*watchStart{},
		addWatch: func(schema.GroupVersionKind) error { adds.Add(1); return nil },
		opts: Options{WatchAccess: func(context.Context, schema.GroupVersionKind) error {
			checks.Add(1)
			<-release
			if allow.Load() {
				return nil
			}
			return &machine.AccessError{Denied: []string{"list/watch configmaps cluster-wide"}}
		}},
	}
	ctx := context.Background()
	first, second := make(chan error, 1), make(chan error, 1)
	go func() { first <- r.ensureWatch(ctx, gvk) }()
	synctest.Wait() // the first caller is checking access
	go func() { second <- r.ensureWatch(ctx, gvk) }()
	synctest.Wait() // the second caller is blocked too: on the first's start, or on a check of its own
	select {
	case err := <-second:
		t.Fatalf("second caller returned before the start finished: %v", err)
	default:
	}
	if n := checks.Load(); n != 1 {
		t.Fatalf("%d access checks while one start is under way, want 1", n)
	}
	close(release)
	for _, ch := range []chan error{first, second} {
		var ae *machine.AccessError
		if err := <-ch; !errors.As(err, &ae) {
			t.Fatalf("got %v, want the machine.AccessError", err)
		}
	}
	if checks.Load() != 1 || adds.Load() != 0 {
		t.Fatalf("checks %d, adds %d; want one check and no watch", checks.Load(), adds.Load())
	}

	// Forgotten after the failure: the next pass checks again, and starts the watch once.
	allow.Store(true)
	for range 3 {
		if err := r.ensureWatch(ctx, gvk); err != nil {
			t.Fatal(err)
		}
	}
	if checks.Load() != 2 || adds.Load() != 1 {
		t.Fatalf("checks %d, adds %d; want 2 and 1", checks.Load(), adds.Load())
	}
}

// An update of an operand wakes the CR its owner annotation names (whether it asks for a
// drift check is Memory's: machine's TestOperandUpdatesAskForDriftChecks); another kind's
// object wakes none.
func TestOperandUpdatesWakeTheirCR(t *testing.T) {
	t.Parallel()
	crGVK := schema.GroupVersionKind{Group: "test.rudder.dev", Version: "v1", Kind: "Widget"}
	key := types.NamespacedName{Namespace: "ns", Name: "w"}
	for _, tc := range []struct {
		name  string
		owner string
		want  int
	}{
		{"owned by a CR of the kind", records.OwnerAnnotation(crGVK.GroupKind(), key), 1},
		{"owned by another kind's CR", records.OwnerAnnotation(schema.GroupKind{Group: "other.rudder.dev", Kind: "Widget"}, key), 0},
		{"owned by none", "", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := &Reconciler{gvk: crGVK, memory: machine.NewMemory(&watches.Watch{Group: crGVK.Group, Version: crGVK.Version, Kind: crGVK.Kind})}
			d := func(gen int64) *appsv1.Deployment {
				return &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "w", Generation: gen,
					Annotations: map[string]string{records.AnnotationOwner: tc.owner}}}
			}
			q := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[reconcile.Request]())
			defer q.ShutDown()
			watchEvents{r}.dependentHandler(schema.GroupKind{Group: "apps", Kind: "Deployment"}).Update(context.Background(),
				event.TypedUpdateEvent[client.Object]{ObjectOld: d(1), ObjectNew: d(2)}, q)
			if q.Len() != tc.want {
				t.Fatalf("%d requests queued, want %d", q.Len(), tc.want)
			}
		})
	}
}
