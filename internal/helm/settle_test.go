package helm

import (
	"errors"
	"io"
	"log/slog"
	"testing"

	"github.com/go-logr/logr"
	"helm.sh/helm/v4/pkg/action"
	chartcommon "helm.sh/helm/v4/pkg/chart/common"
	chart "helm.sh/helm/v4/pkg/chart/v2"
	kubefake "helm.sh/helm/v4/pkg/kube/fake"
	"helm.sh/helm/v4/pkg/release/common"
	release "helm.sh/helm/v4/pkg/release/v1"
	"helm.sh/helm/v4/pkg/storage"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/rudder-operator/rudder/internal/records"
)

// settleRun is a run of Helm's own actions over rudder's record driver on a fake clientset,
// with Helm's printing kube client in place of a cluster.
func settleRun(t *testing.T, cs *fake.Clientset) *run {
	t.Helper()
	records := &checkedDriver{Driver: records.NewDriver(cs.CoreV1().Secrets("ns")),
		check: func(*release.Release) error { return nil }}
	conf := action.NewConfiguration(action.ConfigurationSetLogger(slog.DiscardHandler))
	conf.Releases, conf.KubeClient, conf.Capabilities = storage.Init(records), &kubefake.PrintingKubeClient{Out: io.Discard}, chartcommon.DefaultCapabilities
	return &run{records: records, log: logr.Discard(), conf: conf}
}

func statuses(t *testing.T, cs *fake.Clientset) map[int]common.Status {
	t.Helper()
	hist, err := records.V1sOf(storage.Init(records.NewDriver(cs.CoreV1().Secrets("ns"))).History("web"))
	if err != nil {
		t.Fatal(err)
	}
	out := map[int]common.Status{}
	for _, r := range hist {
		out[r.Version] = r.Info.Status
	}
	return out
}

// failUpdateOnce makes the API server refuse the next update of one record, as an etcd
// outage in the middle of an action does.
func failUpdateOnce(cs *fake.Clientset, secret string) {
	failed := false
	cs.PrependReactor("update", "secrets", func(a k8stesting.Action) (bool, runtime.Object, error) {
		u := a.(k8stesting.UpdateAction)
		if failed || u.GetObject().(interface{ GetName() string }).GetName() != secret {
			return false, nil, nil
		}
		failed = true
		return true, nil, errors.New("rpc error: code = Unavailable desc = error reading from server: connection reset by peer")
	})
}

var settleChart = &chart.Chart{Metadata: &chart.Metadata{APIVersion: "v2", Name: "web", Version: "0.1.0"},
	Templates: []*chartcommon.File{{Name: "templates/cm.yaml", Data: []byte("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: web\ndata:\n  n: {{ .Values.n | quote }}\n")}}}

func settleInstall(t *testing.T, cs *fake.Clientset) {
	t.Helper()
	in := action.NewInstall(settleRun(t, cs).conf)
	in.ReleaseName, in.Namespace = "web", "ns"
	if _, err := in.Run(settleChart, map[string]any{"n": 1}); err != nil {
		t.Fatal(err)
	}
}

func settleUpgrade(r *run) error {
	_, err := action.NewUpgrade(r.conf).Run("web", settleChart, map[string]any{"n": 2})
	return err
}

// Helm's upgrade and rollback only log a failed update of the revision they replace, which
// leaves it deployed next to the new one; settle marks it superseded.
func TestSettleSupersedesWhatALostUpdateLeftDeployed(t *testing.T) {
	rollback := func(r *run) error {
		rb := action.NewRollback(r.conf)
		rb.Version = 1
		return rb.Run("web")
	}
	for _, tc := range []struct {
		name string
		// upgrades after the install of revision 1; fail: the record whose update is lost; act:
		// the action.
		upgrades int
		fail     string
		act      func(*run) error
		want     map[int]common.Status
	}{
		{"upgrade", 0, "sh.helm.release.v1.web.v1", settleUpgrade,
			map[int]common.Status{1: common.StatusSuperseded, 2: common.StatusDeployed}},
		{"rollback", 1, "sh.helm.release.v1.web.v2", rollback,
			map[int]common.Status{1: common.StatusSuperseded, 2: common.StatusSuperseded, 3: common.StatusDeployed}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cs := fake.NewClientset()
			settleInstall(t, cs)
			for range tc.upgrades {
				if err := settleUpgrade(settleRun(t, cs)); err != nil {
					t.Fatal(err)
				}
			}

			failUpdateOnce(cs, tc.fail)
			r := settleRun(t, cs)
			err := tc.act(r)
			if err != nil {
				t.Fatalf("the action failed (%v); Helm is meant to log the lost update and succeed", err)
			}
			deployed := 0
			for _, s := range statuses(t, cs) {
				if s == common.StatusDeployed {
					deployed++
				}
			}
			if deployed != 2 {
				t.Fatalf("Helm left %d deployed revisions after the lost update, want 2 (the case tests nothing): %v", deployed, statuses(t, cs))
			}
			r.settle("web", err)
			got := statuses(t, cs)
			for v, s := range tc.want {
				if got[v] != s {
					t.Errorf("revision %d is %s, want %s (history %v)", v, got[v], s, got)
				}
			}
		})
	}
}

// After an action whose updates all went through, settle sends nothing.
func TestSettleSendsNothingAfterACleanAction(t *testing.T) {
	cs := fake.NewClientset()
	settleInstall(t, cs)
	r := settleRun(t, cs)
	if err := settleUpgrade(r); err != nil {
		t.Fatal(err)
	}
	before := len(cs.Actions())
	r.settle("web", nil)
	if n := len(cs.Actions()) - before; n != 0 {
		t.Fatalf("settle sent %d requests", n)
	}
}
