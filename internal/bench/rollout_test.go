package bench_test

import (
	"context"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	rolloutv1 "github.com/rudder-operator/rudder/api/rollout/v1alpha1"
)

// BenchmarkRollout: the chart edit of BenchmarkChartReload's N=100, through a rollout policy of
// a one-CR canary, then 25 %, then the rest (no settle time): the time until every CR runs the
// edit, and the part of it that is the rollout's own, beyond its gates — from the moment the
// last CR of a wave is Ready on the new chart until the next wave starts, summed over the
// waves, as this harness sees both every 10 ms (gates-seen: of how many waves it saw the
// moment; a wave whose next started between two samples adds nothing).
func BenchmarkRollout(b *testing.B) {
	onlyOnce(b)
	const n = 100
	gvk, ns := webGVK.GroupVersion().WithKind("Wave100"), "wave100"
	start := installedThenEdited(b, gvk, ns, "wave", n)
	var beyond time.Duration
	seen := 0
	var readyAt time.Time // when the harness first saw every CR of the current wave Ready
	wave := int32(0)
	for deadline := start.Add(10 * time.Minute); ; time.Sleep(10 * time.Millisecond) { // sampling the rollout
		if time.Now().After(deadline) {
			b.Fatalf("the rollout did not complete in 10 minutes (wave %d)", wave)
		}
		var list rolloutv1.RolloutList
		if err := k8s.List(context.Background(), &list); err != nil {
			b.Fatal(err)
		}
		var ro *rolloutv1.Rollout
		for i := range list.Items {
			if list.Items[i].Spec.Kind == gvk.Kind && list.Items[i].CreationTimestamp.After(start.Add(-time.Second)) {
				ro = &list.Items[i]
			}
		}
		if ro == nil {
			continue
		}
		if ro.Status.Wave != wave {
			if !readyAt.IsZero() {
				beyond += time.Since(readyAt)
				seen++
			}
			wave, readyAt = ro.Status.Wave, time.Time{}
		}
		if readyAt.IsZero() && count(b, crs, gvk, ns, readyOn(2)) >= admittedBy(wave, n) {
			readyAt = time.Now()
		}
		if ro.Status.Phase == rolloutv1.PhaseComplete {
			if !readyAt.IsZero() {
				beyond += time.Since(readyAt)
				seen++
			}
			break
		}
	}
	took := time.Since(start)
	b.ReportMetric(took.Seconds(), "s-change-to-complete")
	b.ReportMetric(beyond.Seconds(), "s-beyond-gates")
	b.ReportMetric(float64(seen), "gates-seen")
	b.ReportMetric(0, "ns/op")
}

// readyOn: the CR is Ready on revision of its release.
func readyOn(revision int64) func(u *unstructured.Unstructured) bool {
	return func(u *unstructured.Unstructured) bool {
		st, _ := u.Object["status"].(map[string]any)
		rel, _ := st["release"].(map[string]any)
		rev, _ := rel["revision"].(int64)
		s, g := condStatus(u, "Ready")
		return rev == revision && s == "True" && g == u.GetGeneration()
	}
}

// admittedBy is how many of n CRs the bench's policy (1, 25 %, the rest) has moved by wave.
func admittedBy(wave int32, n int) int {
	switch wave {
	case 0:
		return 0
	case 1:
		return 1
	case 2:
		return (25*n + 99) / 100
	}
	return n
}
