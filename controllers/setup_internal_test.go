package controllers

import (
	"context"
	"errors"
	"maps"
	"sync/atomic"
	"testing"
	"testing/synctest"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/rudder-operator/rudder/internal/records"
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

// An operand's update asks for a drift check when it changes the spec (the generation) or a
// label or annotation its release's manifest sets; metadata another controller keeps on the
// object (a Deployment's revision annotation) and the cached verdict only wake the CR. A CR
// whose manifest this process does not know, or an object it does not hold, is checked.
func TestOperandUpdatesAskForDriftChecks(t *testing.T) {
	t.Parallel()
	crGVK := schema.GroupVersionKind{Group: "test.rudder.dev", Version: "v1", Kind: "Widget"}
	key := types.NamespacedName{Namespace: "ns", Name: "w"}
	owner := records.OwnerAnnotation(crGVK.GroupKind(), key)
	deployment := func(generation int64, labels, annotations map[string]string) *appsv1.Deployment {
		ann := map[string]string{records.AnnotationOwner: owner}
		maps.Copy(ann, annotations)
		return &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "w", Generation: generation,
			Labels: labels, Annotations: ann}}
	}
	manifest := deployment(1, map[string]string{"app": "w", records.LabelManaged: "true"}, map[string]string{"example.com/team": "a"})
	manifest.SetGroupVersionKind(appsv1.SchemeGroupVersion.WithKind("Deployment"))
	live := deployment(1, map[string]string{"app": "w", records.LabelManaged: "true"}, map[string]string{kstatusKey: "InProgress", "example.com/team": "a"})
	for _, tc := range []struct {
		name     string
		gk       schema.GroupKind
		known    bool
		cur      *appsv1.Deployment
		wantDirt bool
	}{
		{"status only: the verdict changed", apps("Deployment"), true,
			deployment(1, live.Labels, map[string]string{kstatusKey: "Current", "example.com/team": "a"}), false},
		{"another controller's annotation", apps("Deployment"), true,
			deployment(1, live.Labels, map[string]string{kstatusKey: "InProgress", "example.com/team": "a", "deployment.kubernetes.io/revision": "1"}), false},
		{"another controller's label", apps("Deployment"), true,
			deployment(1, map[string]string{"app": "w", records.LabelManaged: "true", "pod-template-hash": "x"}, live.Annotations), false},
		{"a label the manifest sets", apps("Deployment"), true,
			deployment(1, map[string]string{"app": "tampered", records.LabelManaged: "true"}, live.Annotations), true},
		{"a label the manifest sets, removed", apps("Deployment"), true,
			deployment(1, map[string]string{records.LabelManaged: "true"}, live.Annotations), true},
		{"an annotation the manifest sets", apps("Deployment"), true,
			deployment(1, live.Labels, map[string]string{kstatusKey: "InProgress", "example.com/team": "b"}), true},
		{"the spec", apps("Deployment"), true, deployment(2, live.Labels, live.Annotations), true},
		{"a kind the manifest does not hold under that name", apps("ReplicaSet"), true,
			deployment(1, live.Labels, map[string]string{"deployment.kubernetes.io/revision": "1"}), true},
		{"a manifest this process does not know", apps("Deployment"), false,
			deployment(1, live.Labels, map[string]string{"deployment.kubernetes.io/revision": "1"}), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := &Reconciler{gvk: crGVK, dirty: map[types.NamespacedName]drift{}, manifests: map[types.NamespacedName]parsedManifest{}}
			if tc.known {
				r.rememberObjects(key, 1, []*unstructured.Unstructured{toUnstructured(t, manifest)})
			}
			q := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[reconcile.Request]())
			defer q.ShutDown()
			r.dependentHandler(tc.gk).Update(context.Background(), event.TypedUpdateEvent[client.Object]{ObjectOld: live, ObjectNew: tc.cur}, q)
			if q.Len() != 1 {
				t.Fatalf("%d requests queued, want the CR's", q.Len())
			}
			if dirty := r.dirty[key] != 0; dirty != tc.wantDirt {
				t.Fatalf("drift check asked: %v, want %v", dirty, tc.wantDirt)
			}
		})
	}
}

func apps(kind string) schema.GroupKind { return schema.GroupKind{Group: "apps", Kind: kind} }

func toUnstructured(t *testing.T, obj runtime.Object) *unstructured.Unstructured {
	t.Helper()
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		t.Fatal(err)
	}
	return &unstructured.Unstructured{Object: m}
}
