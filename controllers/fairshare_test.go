package controllers_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rudder-operator/rudder/internal/crtest"
)

// TestOneNamespaceHoldsNoOtherTenant (issue 49): one namespace creates 600 CRs at once; a CR
// of another namespace created while hundreds of them still wait is served before them, not
// after: the kind's queue hands CRs out, and its active slots to the workers, round robin over
// namespaces.
func TestOneNamespaceHoldsNoOtherTenant(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	crowd, other := crtest.NewNamespace(t, k8s, "crowd-"), crtest.NewNamespace(t, k8s, "t-")
	const n = 600
	names := make(chan string)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for name := range names {
				if err := k8s.Create(ctx, crtest.NewCR(tenantBoxGVK, crowd, name, map[string]any{})); err != nil {
					t.Error(err)
				}
			}
		})
	}
	for i := range n {
		names <- fmt.Sprintf("c%03d", i)
	}
	close(names)
	wg.Wait()
	before := readyIn(t, crowd)
	backlog := n - before
	if backlog < n/3 {
		t.Fatalf("the crowd converged too fast to show anything: %d of %d already Ready", before, n)
	}
	if err := k8s.Create(ctx, crtest.NewCR(tenantBoxGVK, other, "late", map[string]any{})); err != nil {
		t.Fatal(err)
	}
	crtest.WaitCondition(t, k8s, tenantBoxGVK, other, "late", "Ready", metav1.ConditionTrue, "", 2*time.Minute)
	after := readyIn(t, crowd)
	t.Logf("the late CR was Ready after %d of the crowd's backlog of %d", after-before, backlog)
	// In one FIFO queue it would wait for the whole backlog; with a fair queue but slots
	// taken in the order workers asked for them, for the 64 workers already holding one of
	// the crowd's CRs (gate.PoolSize of the suite's 4).
	if after-before > 32 {
		t.Fatalf("the late CR waited for %d of the %d CRs of the crowd that were waiting before it", after-before, backlog)
	}
}

// readyIn counts the TenantBoxes of ns that are Ready.
func readyIn(t *testing.T, ns string) int {
	t.Helper()
	var list unstructured.UnstructuredList
	list.SetGroupVersionKind(tenantBoxGVK.GroupVersion().WithKind(tenantBoxGVK.Kind + "List"))
	if err := k8s.List(context.Background(), &list, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	ready := 0
	for i := range list.Items {
		if c := crtest.Condition(&list.Items[i], "Ready"); c != nil && c.Status == metav1.ConditionTrue {
			ready++
		}
	}
	return ready
}
