package faults_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"helm.sh/helm/v3/pkg/release"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	rolloutv1 "github.com/rudder-operator/rudder/api/rollout/v1alpha1"
	"github.com/rudder-operator/rudder/internal/chartsource/chartsourcetest"
	"github.com/rudder-operator/rudder/internal/crtest"
	rrecords "github.com/rudder-operator/rudder/internal/records"
)

var rolloutGVK = schema.GroupVersionKind{Group: "test.rudder.dev", Version: "v1", Kind: "RolloutProbe"}

// TestSIGKILLMidWave kills rudder in the middle of a rollout's second wave (a one-CR canary,
// then the other 11) and starts another: the rollout completes, and every CR ends with exactly
// one revision of the new chart that was deployed (a revision the kill left pending is marked
// failed, as after any SIGKILL), none skipped.
func TestSIGKILLMidWave(t *testing.T) {
	ctx := context.Background()
	ns := crtest.NewNamespace(t, k8s, "faults-")
	r := start(t, "rudder-0")
	var names []string
	for i := range 12 {
		names = append(names, fmt.Sprintf("r%02d", i))
		if err := k8s.Create(ctx, crtest.NewCR(rolloutGVK, ns, names[i], map[string]any{})); err != nil {
			t.Fatal(err)
		}
	}
	for _, n := range names {
		crtest.WaitCondition(t, k8s, rolloutGVK, ns, n, "Ready", metav1.ConditionTrue, "", 3*time.Minute)
	}
	from := crtest.History(t, cluster, ns, names[0])[0].Labels[rrecords.LabelChartDigest]
	files, err := chartsourcetest.ReadDir(filepath.Join(root, "controllers/testdata/charts/day2"))
	if err != nil {
		t.Fatal(err)
	}
	files["templates/all.yaml"] = strings.Replace(files["templates/all.yaml"], "tier: {{ .Values.tier | quote }}", "tier: {{ .Values.tier | quote }}\n  edition: \"2\"", 1)
	if err := chartsourcetest.PublishAtomic(rolloutChart, files); err != nil {
		t.Fatal(err)
	}
	// The middle of wave 2: the canary and at least one other CR have a record of revision 2,
	// and at least one CR has none yet.
	for deadline := time.Now().Add(3 * time.Minute); ; time.Sleep(10 * time.Millisecond) { // polling the API server
		n := records(t, ns, 2).stored
		if n >= 2 && n < len(names) {
			t.Logf("killing rudder with %d of %d CRs at revision 2", n, len(names))
			break
		}
		if n >= len(names) || time.Now().After(deadline) {
			t.Fatalf("the kill missed the middle of wave 2: %d of %d CRs at revision 2", n, len(names))
		}
	}
	r.kill()
	start(t, "rudder-1")
	var ro *rolloutv1.Rollout
	crtest.Eventually(t, "the rollout Complete", 3*time.Minute, func(ctx context.Context) (bool, error) {
		var list rolloutv1.RolloutList
		if err := k8s.List(ctx, &list); err != nil {
			return false, err
		}
		for i := range list.Items {
			if it := &list.Items[i]; it.Spec.Kind == rolloutGVK.Kind && it.Spec.From == from {
				ro = it
			}
		}
		return ro != nil && ro.Status.Phase == rolloutv1.PhaseComplete, nil
	})
	if s := ro.Status; s.Total != 12 || s.Moved != 12 || s.Ready != 12 || s.Failed != 0 {
		t.Errorf("rollout status: %+v", s)
	}
	for _, n := range names {
		crtest.WaitCondition(t, k8s, rolloutGVK, ns, n, "Ready", metav1.ConditionTrue, "", 3*time.Minute)
		deployedOnNew, newest := 0, (*release.Release)(nil)
		for _, rel := range crtest.History(t, cluster, ns, n) {
			if rel.Labels[rrecords.LabelChartDigest] == ro.Spec.To && (rel.Info.Status == release.StatusDeployed || rel.Info.Status == release.StatusSuperseded) {
				deployedOnNew++
			}
			if newest == nil || rel.Version > newest.Version {
				newest = rel
			}
		}
		if deployedOnNew != 1 || newest.Info.Status != release.StatusDeployed || newest.Labels[rrecords.LabelChartDigest] != ro.Spec.To {
			t.Errorf("%s: %d deployed revisions of chart %s; newest %d %s of chart %s", n, deployedOnNew, ro.Spec.To, newest.Version, newest.Info.Status, newest.Labels[rrecords.LabelChartDigest])
		}
	}
}
