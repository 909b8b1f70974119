package faults_test

import (
	"context"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	rstatus "github.com/rudder-operator/rudder/api/status"
	"github.com/rudder-operator/rudder/internal/crtest"
)

var retryProbeGVK = schema.GroupVersionKind{Group: "test.rudder.dev", Version: "v1", Kind: "RetryProbe"}

// TestSIGKILLDuringARetry: rudder is killed while a failed install (a ResourceQuota refuses
// it) waits for its retry (remediation.retries 2). The next process neither forgets the
// failures counted (status.release.failed has them) nor adds tries: the install is tried
// exactly three times in all, then held back.
func TestSIGKILLDuringARetry(t *testing.T) {
	ctx := context.Background()
	ns := crtest.NewNamespace(t, k8s, "faults-retry-")
	crtest.NoConfigMaps(t, k8s, ns)
	r := start(t, "rudder-0")
	if err := k8s.Create(ctx, crtest.NewCR(retryProbeGVK, ns, "q", map[string]any{})); err != nil {
		t.Fatal(err)
	}
	crtest.Eventually(t, "the first failure counted", timeout, func(ctx context.Context) (bool, error) {
		u, err := crtest.Get(ctx, k8s, retryProbeGVK, ns, "q")
		return err == nil && crtest.Failures(u) >= 1, err
	})
	r.kill()
	u, err := crtest.Get(ctx, k8s, retryProbeGVK, ns, "q")
	if err != nil {
		t.Fatal(err)
	}
	killedAt := crtest.Failures(u)

	start(t, "rudder-1")
	u = crtest.WaitCondition(t, k8s, retryProbeGVK, ns, "q", rstatus.TypeStalled, metav1.ConditionTrue, rstatus.ReasonInstallFailed, timeout)
	if n := crtest.Failures(u); n != 3 {
		t.Fatalf("held back after %d failures (%d when the first process was killed), want 3", n, killedAt)
	}
	tries := crtest.CountEvents(t, k8s, ns, "q", rstatus.ReasonInstallFailed)
	if tries != 3 {
		t.Fatalf("%d failed installs across the two processes, want 3 (the first process had counted %d)", tries, killedAt)
	}
}
