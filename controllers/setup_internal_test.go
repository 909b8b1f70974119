package controllers

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"testing/synctest"

	"k8s.io/apimachinery/pkg/runtime/schema"
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
			return &AccessError{Denied: []string{"list/watch configmaps cluster-wide"}}
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
		var ae *AccessError
		if err := <-ch; !errors.As(err, &ae) {
			t.Fatalf("got %v, want the AccessError", err)
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
