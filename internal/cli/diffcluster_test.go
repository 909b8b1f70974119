package cli

import (
	"testing"

	"helm.sh/helm/v4/pkg/release/common"
	hrelease "helm.sh/helm/v4/pkg/release/v1"
	"helm.sh/helm/v4/pkg/storage"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/rudder-operator/rudder/internal/records"
)

// A failed install kept as its record (records.Head.Kept) has had its objects removed: `rudder
// diff --cluster` compares a CR's render with nothing, as for a CR with no release, not with
// the manifest that failed; a failed revision that is not kept still has its objects.
func TestLiveReleaseOfAKeptFailedInstallIsEmpty(t *testing.T) {
	const manifest = "---\n# Source: c/templates/cm.yaml\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: w\n  namespace: ns\n"
	for _, tc := range []struct {
		name    string
		labels  map[string]string
		objects int
	}{
		{"kept", map[string]string{records.LabelObjectsRemoved: "1"}, 0},
		{"failed, not kept", nil, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cs := fake.NewClientset()
			st := storage.Init(records.NewDriver(cs.CoreV1().Secrets("ns")))
			rel := &hrelease.Release{Name: "w", Namespace: "ns", Version: 1, Manifest: manifest, Labels: tc.labels,
				Info: &hrelease.Info{Status: common.StatusFailed, Description: `Release "w" failed: boom`}}
			if err := st.Create(rel); err != nil {
				t.Fatal(err)
			}
			cr := &unstructured.Unstructured{}
			cr.SetNamespace("ns")
			cr.SetName("w")
			live, err := liveRelease(cs, func(*unstructured.Unstructured) (string, error) { return "w", nil }, cr)
			if err != nil || live.err != nil {
				t.Fatal(err, live.err)
			}
			if got := len(live.objects); got != tc.objects {
				t.Errorf("%d live objects, want %d", got, tc.objects)
			}
		})
	}
}
