package faults_test

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/rudder-operator/rudder/internal/crtest"
)

var tenantBoxGVK = schema.GroupVersionKind{Group: "test.rudder.dev", Version: "v1", Kind: "TenantBox"}

// TestAttacksLeaveTheProcessRunning: renders that recurse or allocate without end (a value fed
// to tpl calling tpl on itself, a count fed to until) used to kill rudder, again after every
// restart. Run as the process it ships as, rudder stalls those CRs, serves another tenant's
// CR, and never exits.
func TestAttacksLeaveTheProcessRunning(t *testing.T) {
	ns := crtest.NewNamespace(t, k8s, "attack-")
	r := start(t, "attacked")
	ctx := context.Background()
	attacks := map[string]map[string]any{
		"recurse": {"extraManifest": "{{ tpl .Values.extraManifest . }}"},
		"alloc":   {"replicaCount": 300000000, "perReplicaService": true},
	}
	for name, spec := range attacks {
		if err := k8s.Create(ctx, crtest.NewCR(tenantBoxGVK, ns, name, spec)); err != nil {
			t.Fatal(err)
		}
	}
	for name := range attacks {
		crtest.WaitCondition(t, k8s, tenantBoxGVK, ns, name, "Stalled", metav1.ConditionTrue, "ChartInvalid", 2*time.Minute)
	}
	other := crtest.NewNamespace(t, k8s, "bystander-")
	createWeb(t, other, "bystander", "", 1)
	crtest.WaitCondition(t, k8s, webGVK, other, "bystander", "Ready", metav1.ConditionTrue, "", time.Minute)
	select {
	case <-r.done:
		t.Fatalf("rudder exited:\n%s", tail(r.logs()))
	default:
	}
}
