package controllers_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rudder-operator/rudder/internal/crtest"
	"github.com/rudder-operator/rudder/internal/helm/helmtest"
	"github.com/rudder-operator/rudder/internal/records"
)

// TestLiveChartReload edits the gizmo chart through ConfigMap-style atomic swaps: every Gizmo
// follows with exactly one new revision; a broken chart changes nothing and says why; a fix
// recovers.
func TestLiveChartReload(t *testing.T) {
	ctx := context.Background()
	ns := crtest.NewNamespace(t, k8s, "t-")
	names := []string{"g1", "g2", "g3"}
	for _, n := range names {
		if err := k8s.Create(ctx, crtest.NewCR(gizmoGVK, ns, n, map[string]any{"message": n})); err != nil {
			t.Fatal(err)
		}
	}
	for _, n := range names {
		crtest.WaitCondition(t, k8s, gizmoGVK, ns, n, "Ready", metav1.ConditionTrue, "", timeout)
	}
	src := filepath.Join(chartDir, "widget")
	tpl, err := os.ReadFile(filepath.Join(src, "templates", "all.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	edited := strings.Replace(string(tpl), "message: {{ .Values.message | quote }}",
		"message: {{ .Values.message | quote }}\n  edition: \"2\"", 1)
	vol := filepath.Join(chartDir, "gizmo")
	before, _ := charts.Get(vol)
	if err := swapChart(vol, src, map[string]string{"templates/all.yaml": edited}); err != nil {
		t.Fatal(err)
	}
	crtest.Eventually(t, "the chart source to load the new version", timeout, func(context.Context) (bool, error) {
		st, _ := charts.Get(vol)
		return st.Current.Digest != before.Current.Digest, nil
	})
	st, _ := charts.Get(vol)
	for _, n := range names {
		crtest.Eventually(t, n+" upgraded to the new chart", timeout, func(ctx context.Context) (bool, error) {
			u, err := crtest.Get(ctx, k8s, gizmoGVK, ns, n)
			if err != nil {
				return false, err
			}
			d, _, _ := unstructured.NestedString(u.Object, "status", "release", "chartDigest")
			c := crtest.Condition(u, "Ready")
			return d != "" && strings.HasPrefix(strings.TrimPrefix(st.Current.Digest, "sha256:"), d) &&
				c != nil && c.Status == metav1.ConditionTrue, nil
		})
		var cm corev1.ConfigMap
		if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: n}, &cm); err != nil || cm.Data["edition"] != "2" {
			t.Fatalf("%s: operand not from the new chart: %v %v", n, err, cm.Data)
		}
		h := helmtest.History(t, cluster.Kubeconfig, ns, n)
		if len(h) != 2 {
			t.Fatalf("%s: %s", n, describe(h))
		}
		if !strings.Contains(h[1].Info.Description, records.DisplayDigest(st.Current.Digest)) {
			t.Errorf("revision description %q does not name digest %s", h[1].Info.Description, records.DisplayDigest(st.Current.Digest))
		}
	}

	// A broken template: nothing changes, every CR says why.
	if err := swapChart(vol, src, map[string]string{"templates/all.yaml": "{{ .Values.message | nosuchfunc }}"}); err != nil {
		t.Fatal(err)
	}
	for _, n := range names {
		u := crtest.WaitCondition(t, k8s, gizmoGVK, ns, n, "ChartReady", metav1.ConditionFalse, "ChartInvalid", timeout)
		if msg := crtest.Condition(u, "ChartReady").Message; !strings.Contains(msg, "nosuchfunc") {
			t.Errorf("ChartReady message: %s", msg)
		}
		if h := helmtest.History(t, cluster.Kubeconfig, ns, n); len(h) != 2 {
			t.Fatalf("a broken chart made a revision: %s", describe(h))
		}
	}
	// The fix recovers: the condition clears and the fixed chart rolls out.
	fixed := strings.Replace(edited, `edition: "2"`, `edition: "3"`, 1)
	if err := swapChart(vol, src, map[string]string{"templates/all.yaml": fixed}); err != nil {
		t.Fatal(err)
	}
	for _, n := range names {
		crtest.WaitCondition(t, k8s, gizmoGVK, ns, n, "ChartReady", metav1.ConditionTrue, "", timeout)
		crtest.Eventually(t, n+" on the fixed chart", timeout, func(ctx context.Context) (bool, error) {
			var cm corev1.ConfigMap
			err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: n}, &cm)
			return err == nil && cm.Data["edition"] == "3", err
		})
		crtest.WaitCondition(t, k8s, gizmoGVK, ns, n, "Ready", metav1.ConditionTrue, "", timeout)
		crtest.Eventually(t, n+" revision 3 deployed", timeout, func(ctx context.Context) (bool, error) {
			h := helmtest.History(t, cluster.Kubeconfig, ns, n)
			return len(h) == 3 && h[2].Info.Status == "deployed", nil
		})
		if h := helmtest.History(t, cluster.Kubeconfig, ns, n); len(h) != 3 {
			t.Fatalf("%s after the fix: %s", n, describe(h))
		}
	}
}
