// Package crtest holds the helpers that integration tests share to wait on CRs and their
// conditions against a real API server.
package crtest

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	rstatus "github.com/rudder-operator/rudder/api/status"
)

// Eventually polls cond until it returns true, failing the test after timeout with the last
// error cond returned (an error means "not yet", not "stop").
func Eventually(t testing.TB, what string, timeout time.Duration, cond func(ctx context.Context) (bool, error)) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var lastErr error
	err := wait.PollUntilContextCancel(ctx, 150*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		ok, err := cond(ctx)
		if err != nil {
			lastErr = err
			return false, nil
		}
		return ok, nil
	})
	if err != nil {
		t.Fatalf("waiting for %s: %v (last error: %v)", what, err, lastErr)
	}
}

// Get reads a CR as unstructured.
func Get(ctx context.Context, c client.Reader, gvk schema.GroupVersionKind, ns, name string) (*unstructured.Unstructured, error) {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(gvk)
	err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, u)
	return u, err
}

// Condition returns the CR's condition of type typ, or nil, read as the reconciler reads it.
func Condition(u *unstructured.Unstructured, typ string) *metav1.Condition {
	return meta.FindStatusCondition(rstatus.ConditionsOf(u), typ)
}

// WaitCondition waits until the CR's condition has the status (and reason, if given) for the
// CR's current generation, and returns the CR as last read.
func WaitCondition(t testing.TB, c client.Reader, gvk schema.GroupVersionKind, ns, name, typ string, status metav1.ConditionStatus,
	reason string, timeout time.Duration) *unstructured.Unstructured {
	t.Helper()
	var last *unstructured.Unstructured
	Eventually(t, fmt.Sprintf("%s %s/%s %s=%s %s", gvk.Kind, ns, name, typ, status, reason), timeout, func(ctx context.Context) (bool, error) {
		u, err := Get(ctx, c, gvk, ns, name)
		if err != nil {
			return false, err
		}
		last = u
		cond := Condition(u, typ)
		if cond == nil {
			return false, fmt.Errorf("no %s condition yet", typ)
		}
		if cond.Status != status || (reason != "" && cond.Reason != reason) || cond.ObservedGeneration != u.GetGeneration() {
			return false, fmt.Errorf("%s=%s reason %s gen %d/%d: %s", typ, cond.Status, cond.Reason, cond.ObservedGeneration, u.GetGeneration(),
				cond.Message)
		}
		return true, nil
	})
	return last
}

// WaitEvent waits for an Event on the object named object in ns, with reason, whose note
// contains every one of contains, and returns its note.
func WaitEvent(t testing.TB, c client.Reader, ns, object, reason string, contains ...string) string {
	t.Helper()
	var note string
	Eventually(t, fmt.Sprintf("a %s event on %s/%s", reason, ns, object), 30*time.Second, func(ctx context.Context) (bool, error) {
		var evs corev1.EventList
		if err := c.List(ctx, &evs, client.InNamespace(ns)); err != nil {
			return false, err
		}
		for _, e := range evs.Items {
			if eventMatches(e, object, reason, contains) {
				note = e.Message
				return true, nil
			}
		}
		return false, nil
	})
	return note
}

// CountEvents counts the occurrences (an Event's count, and those of its series) of the
// Events on the object named object in ns, with reason, whose note contains every one of
// contains.
func CountEvents(t testing.TB, c client.Reader, ns, object, reason string, contains ...string) int {
	t.Helper()
	var evs corev1.EventList
	if err := c.List(context.Background(), &evs, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range evs.Items {
		if !eventMatches(e, object, reason, contains) {
			continue
		}
		n += max(int(e.Count), 1)
		if e.Series != nil {
			n += int(e.Series.Count) - 1
		}
	}
	return n
}

// eventMatches reports whether e is on the object named object, with reason, and its note
// contains every one of contains.
func eventMatches(e corev1.Event, object, reason string, contains []string) bool {
	if e.InvolvedObject.Name != object || e.Reason != reason {
		return false
	}
	for _, s := range contains {
		if !strings.Contains(e.Message, s) {
			return false
		}
	}
	return true
}

// SeriesSum sums the samples of metric name in a Prometheus text exposition (another
// process's /metrics), parsed by Prometheus' own parser, those whose labels include every one of
// labels (nil: all): a counter's or gauge's value, a histogram's sample count (named by its
// family or by its _count series).
func SeriesSum(body, name string, labels map[string]string) float64 {
	parser := expfmt.NewTextParser(model.UTF8Validation)
	// What parsed before an error is kept: a line another exporter writes oddly spoils no
	// other family.
	mfs, _ := parser.TextToMetricFamilies(strings.NewReader(body))
	if mf, ok := mfs[name]; ok {
		return sumSamples(mf, labels)
	}
	// A histogram's count as the exposition spells its series: the parser keeps it under its
	// family's name.
	if family, ok := strings.CutSuffix(name, "_count"); ok && mfs[family].GetType() == dto.MetricType_HISTOGRAM {
		return sumSamples(mfs[family], labels)
	}
	return 0
}

// Metric sums, over controller-runtime's registry, the samples of a counter or gauge (or the sample
// count of a histogram) whose labels include every one of labels: what tests count passes and
// writes with, instead of sleeping and hoping they happened.
func Metric(t testing.TB, name string, labels map[string]string) float64 {
	t.Helper()
	mfs, err := metrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	total := 0.0
	for _, mf := range mfs {
		if mf.GetName() == name {
			total += sumSamples(mf, labels)
		}
	}
	return total
}

// sumSamples sums the samples of mf (nil: none) whose labels include every one of labels.
func sumSamples(mf *dto.MetricFamily, labels map[string]string) float64 {
	total := 0.0
samples:
	for _, m := range mf.GetMetric() {
		for k, v := range labels {
			if !slices.ContainsFunc(m.GetLabel(), func(l *dto.LabelPair) bool { return l.GetName() == k && l.GetValue() == v }) {
				continue samples
			}
		}
		total += m.GetCounter().GetValue() + m.GetGauge().GetValue() + m.GetUntyped().GetValue() +
			float64(m.GetHistogram().GetSampleCount())
	}
	return total
}

// NoConfigMaps creates a ResourceQuota that refuses every ConfigMap in ns (see Quota).
func NoConfigMaps(t testing.TB, c client.Client, ns string) *corev1.ResourceQuota {
	t.Helper()
	return Quota(t, c, ns, corev1.ResourceList{"count/configmaps": resource.MustParse("0")},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "quota-probe"}})
}

// Quota creates a ResourceQuota of hard in ns, and returns once the API server's admission
// enforces it: a dry-run create of probe (a valid object the quota refuses) is refused. Its
// quota lister, or a lookup it cached for 30 s before the quota existed, can lag behind.
func Quota(t testing.TB, c client.Client, ns string, hard corev1.ResourceList, probe client.Object) *corev1.ResourceQuota {
	t.Helper()
	q := &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "quota"}, Spec: corev1.ResourceQuotaSpec{Hard: hard}}
	if err := c.Create(context.Background(), q); err != nil {
		t.Fatal(err)
	}
	Eventually(t, "the quota enforced", time.Minute, func(ctx context.Context) (bool, error) {
		err := c.Create(ctx, probe.DeepCopyObject().(client.Object), client.DryRunAll)
		return apierrors.IsForbidden(err) && strings.Contains(err.Error(), "quota"), nil
	})
	return q
}

// Failures is status.release.failed.failures of a CR: how often its (chart, values) failed in
// a row (0: none held back).
func Failures(u *unstructured.Unstructured) int64 {
	n, _, _ := unstructured.NestedInt64(u.Object, "status", "release", "failed", "failures")
	return n
}
