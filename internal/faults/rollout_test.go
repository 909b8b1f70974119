package faults_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"helm.sh/helm/v4/pkg/release/common"
	release "helm.sh/helm/v4/pkg/release/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	rolloutv1 "github.com/rudder-operator/rudder/api/rollout/v1alpha1"
	"github.com/rudder-operator/rudder/internal/chartsource/chartsourcetest"
	"github.com/rudder-operator/rudder/internal/crtest"
	"github.com/rudder-operator/rudder/internal/helm/helmtest"
	rrecords "github.com/rudder-operator/rudder/internal/records"
)

var rolloutGVK = schema.GroupVersionKind{Group: "test.rudder.dev", Version: "v1", Kind: "RolloutProbe"}

// TestSIGKILLMidWave kills rudder in the middle of a rollout's second wave (a one-CR canary,
// then the other 11) and starts another: the rollout completes, and every CR ends with exactly
// one revision of the new chart that was deployed (a revision the kill left pending is marked
// failed, as after any SIGKILL), none skipped.
func TestSIGKILLMidWave(t *testing.T) {
	midWave(t, "2", func(r *replica) {
		r.kill()
		start(t, "rudder-1")
	})
}

// TestAPIServerRestartMidWave is TestSIGKILLMidWave with kube-apiserver killed (3 s down) in
// the middle of the second wave instead, rudder running on.
func TestAPIServerRestartMidWave(t *testing.T) {
	midWave(t, "3", func(*replica) {
		if err := cluster.KillAndRestart(context.Background(), "kube-apiserver", 3*time.Second); err != nil {
			t.Fatal(err)
		}
	})
}

// midWave makes 12 RolloutProbe CRs, edits their chart (to edition), does fault in the middle
// of the rollout's second wave, and checks that the rollout completes with one deployed
// revision of the new chart per CR.
func midWave(t *testing.T, edition string, fault func(*replica)) {
	t.Helper()
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
	from := helmtest.History(t, cluster.Kubeconfig, ns, names[0])[0].Labels[rrecords.LabelChartDigest]
	files, err := chartsourcetest.ReadDir(filepath.Join(root, "controllers/testdata/charts/day2"))
	if err != nil {
		t.Fatal(err)
	}
	// The edition is the test's own and its namespace's, so that each run (go test -count=N
	// included) edits the chart into one no run published before.
	files["templates/all.yaml"] = strings.Replace(files["templates/all.yaml"], "tier: {{ .Values.tier | quote }}", "tier: {{ .Values.tier | quote }}\n  edition: \""+edition+"-"+ns+"\"", 1)
	if err := chartsourcetest.PublishAtomic(rolloutChart, files); err != nil {
		t.Fatal(err)
	}
	// The middle of wave 2: the canary and at least one other CR have a record of revision 2,
	// and at least one CR has none yet.
	n := 0
	err = wait.PollUntilContextTimeout(context.Background(), 10*time.Millisecond, 3*time.Minute, true, func(context.Context) (bool, error) {
		n = records(t, ns, every(names, 2)).stored
		if n >= len(names) {
			return false, errors.New("every CR moved")
		}
		return n >= 2, nil
	})
	if err != nil {
		t.Fatalf("the fault missed the middle of wave 2: %d of %d CRs at revision 2 (%v)", n, len(names), err)
	}
	t.Logf("the fault with %d of %d CRs at revision 2", n, len(names))
	fault(r)
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
	// Total counts every RolloutProbe of the cluster: another test's may not be gone yet.
	if s := ro.Status; s.Total < 12 || s.Moved != s.Total || s.Ready != s.Total || s.Failed != 0 {
		t.Errorf("rollout status: %+v", s)
	}
	for _, n := range names {
		crtest.WaitCondition(t, k8s, rolloutGVK, ns, n, "Ready", metav1.ConditionTrue, "", 3*time.Minute)
		deployedOnNew, newest := 0, (*release.Release)(nil)
		for _, rel := range helmtest.History(t, cluster.Kubeconfig, ns, n) {
			if rel.Labels[rrecords.LabelChartDigest] == ro.Spec.To && (rel.Info.Status == common.StatusDeployed || rel.Info.Status == common.StatusSuperseded) {
				deployedOnNew++
			}
			if newest == nil || rel.Version > newest.Version {
				newest = rel
			}
		}
		if deployedOnNew != 1 || newest.Info.Status != common.StatusDeployed || newest.Labels[rrecords.LabelChartDigest] != ro.Spec.To {
			t.Errorf("%s: %d deployed revisions of chart %s; newest %d %s of chart %s", n, deployedOnNew, ro.Spec.To, newest.Version, newest.Info.Status, newest.Labels[rrecords.LabelChartDigest])
		}
	}
}

// TestRolloutPerShard: with two shards, a chart edit is rolled out by each shard to its own
// CRs, under a Rollout of its own that names the shard.
func TestRolloutPerShard(t *testing.T) {
	ctx := context.Background()
	gvk := schema.GroupVersionKind{Group: "test.rudder.dev", Version: "v1", Kind: "PausedProbe"}
	ns := crtest.NewNamespace(t, k8s, "faults-")
	shards(t, ns)
	names := map[string]string{"a1": "a", "a2": "a", "r1": "", "r2": ""}
	for n, shard := range names {
		cr := crtest.NewCR(gvk, ns, n, map[string]any{})
		if shard != "" {
			cr.SetLabels(map[string]string{shardLabel: shard})
		}
		if err := k8s.Create(ctx, cr); err != nil {
			t.Fatal(err)
		}
	}
	for n := range names {
		crtest.WaitCondition(t, k8s, gvk, ns, n, "Ready", metav1.ConditionTrue, "", 3*time.Minute)
	}
	// The chart every CR runs now: the rollouts this test waits for move from it (those of an
	// earlier run, with go test -count=N, moved from another).
	from := helmtest.History(t, cluster.Kubeconfig, ns, "a1")[0].Labels[rrecords.LabelChartDigest]
	files, err := chartsourcetest.ReadDir(filepath.Join(root, "controllers/testdata/charts/day2"))
	if err != nil {
		t.Fatal(err)
	}
	// The edition is the namespace's, so that each run edits the chart into one no run
	// published before.
	files["templates/all.yaml"] = strings.Replace(files["templates/all.yaml"], "tier: {{ .Values.tier | quote }}", "tier: {{ .Values.tier | quote }}\n  edition: \"sharded-"+ns+"\"", 1)
	if err := chartsourcetest.PublishAtomic(shardedChart, files); err != nil {
		t.Fatal(err)
	}
	byShard := map[string]*rolloutv1.Rollout{}
	crtest.Eventually(t, "a Complete rollout per shard", 3*time.Minute, func(ctx context.Context) (bool, error) {
		var list rolloutv1.RolloutList
		if err := k8s.List(ctx, &list); err != nil {
			return false, err
		}
		for i := range list.Items {
			if ro := &list.Items[i]; ro.Spec.Kind == gvk.Kind && ro.Spec.From == from && ro.Status.Phase == rolloutv1.PhaseComplete {
				byShard[ro.Spec.Shard] = ro
			}
		}
		return len(byShard) == 2, nil
	})
	// Each shard's rollout moved every CR of the kind it selects: this run's two, and those
	// earlier runs (go test -count=N) left in their namespaces.
	for _, shard := range []string{shardLabel + "=a", shardLabel + "!=a"} {
		selected := crsSelected(t, gvk, shard)
		ro := byShard[shard]
		if ro == nil || ro.Status.Total != selected || ro.Status.Moved != selected || ro.Name != rolloutv1.Name(gvk, shard, ro.Spec.To) {
			t.Errorf("shard %s's rollout (%d CRs of the kind selected): %+v", shard, selected, ro)
		}
	}
	for n := range names {
		h := helmtest.History(t, cluster.Kubeconfig, ns, n)
		if len(h) != 2 || h[1].Info.Status != common.StatusDeployed {
			t.Errorf("%s: %d revisions", n, len(h))
		}
	}
}

// crsSelected counts the CRs of kind gvk, in every namespace, that the label selector shard
// selects.
func crsSelected(t *testing.T, gvk schema.GroupVersionKind, shard string) int32 {
	t.Helper()
	sel, err := labels.Parse(shard)
	if err != nil {
		t.Fatal(err)
	}
	var list unstructured.UnstructuredList
	list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
	if err := k8s.List(context.Background(), &list, client.MatchingLabelsSelector{Selector: sel}); err != nil {
		t.Fatal(err)
	}
	return int32(len(list.Items))
}
