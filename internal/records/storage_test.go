package records

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"testing"

	chartcommon "helm.sh/helm/v4/pkg/chart/common"
	chart "helm.sh/helm/v4/pkg/chart/v2"
	"helm.sh/helm/v4/pkg/release/common"
	release "helm.sh/helm/v4/pkg/release/v1"
	"helm.sh/helm/v4/pkg/storage/driver"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

func testRelease(version int, status common.Status) *release.Release {
	return &release.Release{
		Name: "web", Namespace: "ns", Version: version,
		Info:     &release.Info{Status: status, Description: "rudder install"},
		Chart:    &chart.Chart{Metadata: &chart.Metadata{Name: "web", Version: "0.1.0"}, Templates: []*chartcommon.File{{Name: "templates/cm.yaml", Data: []byte("kind: ConfigMap")}}},
		Config:   map[string]any{"replicas": 2},
		Manifest: "---\nkind: ConfigMap\n",
		Labels:   map[string]string{LabelOwnerUID: "uid-1", LabelValuesDigest: "abc"},
	}
}

// rudder's records must be what Helm's own driver writes — the same Secret, labels and
// release; only the gzip level may differ — so that helm (and every other tool that reads
// Helm's storage) sees no difference.
func TestSecretsDriverWritesWhatHelmWrites(t *testing.T) {
	ctx := context.Background()
	ours, theirs := fake.NewClientset(), fake.NewClientset()
	od := NewDriver(ours.CoreV1().Secrets("ns"))
	hd := driver.NewSecrets(theirs.CoreV1().Secrets("ns"))
	const key = "sh.helm.release.v1.web.v1"

	for i, step := range []func(d driver.Driver) error{
		func(d driver.Driver) error { return d.Create(key, testRelease(1, common.StatusPendingInstall)) },
		func(d driver.Driver) error { return d.Update(key, testRelease(1, common.StatusDeployed)) },
	} {
		if err := step(od); err != nil {
			t.Fatalf("step %d, rudder: %v", i, err)
		}
		if err := step(hd); err != nil {
			t.Fatalf("step %d, helm: %v", i, err)
		}
		o, err := ours.CoreV1().Secrets("ns").Get(ctx, key, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		h, err := theirs.CoreV1().Secrets("ns").Get(ctx, key, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if o.Type != h.Type || len(o.Data) != len(h.Data) || o.Name != h.Name {
			t.Errorf("step %d: %s of type %q (%d keys) vs %s of type %q (%d keys)", i, o.Name, o.Type, len(o.Data), h.Name, h.Type, len(h.Data))
		}
		if ours, theirs := releaseJSON(t, o.Data["release"]), releaseJSON(t, h.Data["release"]); !bytes.Equal(ours, theirs) {
			t.Errorf("step %d: rudder stored\n%s\nhelm stored\n%s", i, ours, theirs)
		}
		for _, l := range []map[string]string{o.Labels, h.Labels} {
			delete(l, "createdAt") // seconds since the epoch: may tick between the two writes
			delete(l, "modifiedAt")
		}
		if len(o.Labels) != len(h.Labels) {
			t.Errorf("step %d: labels %v vs %v", i, o.Labels, h.Labels)
		}
		for k, v := range h.Labels {
			if o.Labels[k] != v {
				t.Errorf("step %d: label %s = %q, helm wrote %q", i, k, o.Labels[k], v)
			}
		}
	}

	// Helm reads rudder's record back.
	got, err := V1Of(driver.NewSecrets(ours.CoreV1().Secrets("ns")).Get(key))
	if err != nil {
		t.Fatal(err)
	}
	if got.Info.Status != common.StatusDeployed || got.Config["replicas"] != float64(2) || got.Labels[LabelOwnerUID] != "uid-1" {
		t.Errorf("read back: status %s config %v labels %v", got.Info.Status, got.Config, got.Labels)
	}
	// A second create of the same revision is refused the way Helm's storage expects.
	if err := od.Create(key, testRelease(1, common.StatusPendingInstall)); !errors.Is(err, driver.ErrReleaseExists) {
		t.Errorf("second create: %v, want ErrReleaseExists", err)
	}
}

// Helm's install takes a failed look at storage for "the name is free". A first revision is
// then stored only after a second look, which finds the longer history whose revision 1 was
// pruned.
func TestSecretsDriverLooksAgainAfterAFailedQuery(t *testing.T) {
	cs := fake.NewClientset()
	d := NewDriver(cs.CoreV1().Secrets("ns"))
	for _, v := range []int{2, 3} {
		if err := d.Create(fmt.Sprintf("sh.helm.release.v1.web.v%d", v), testRelease(v, common.StatusSuperseded)); err != nil {
			t.Fatal(err)
		}
	}
	lists := 0
	cs.PrependReactor("list", "secrets", func(k8stesting.Action) (bool, runtime.Object, error) {
		lists++
		if lists == 1 {
			return true, nil, apierrors.NewServiceUnavailable("etcd is away")
		}
		return false, nil, nil
	})
	if _, err := d.Query(map[string]string{"name": "web", "owner": "helm"}); err == nil {
		t.Fatal("the first query should fail")
	}
	if err := d.Create("sh.helm.release.v1.web.v1", testRelease(1, common.StatusPendingInstall)); !errors.Is(err, driver.ErrReleaseExists) {
		t.Fatalf("create of revision 1 over revisions 2 and 3: %v, want ErrReleaseExists", err)
	}
	if _, err := cs.CoreV1().Secrets("ns").Get(context.Background(), "sh.helm.release.v1.web.v1", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("revision 1 was stored: %v", err)
	}

	// A successful look needs no second one.
	if _, err := d.Query(map[string]string{"name": "api", "owner": "helm"}); !errors.Is(err, driver.ErrReleaseNotFound) {
		t.Fatal(err)
	}
	before := lists
	if err := d.Create("sh.helm.release.v1.api.v1", testRelease(1, common.StatusPendingInstall)); err != nil {
		t.Fatal(err)
	}
	if lists != before {
		t.Errorf("create after a successful query listed again (%d lists)", lists-before)
	}
}

// releaseJSON is the release a record holds, as Helm decodes it, in JSON.
func releaseJSON(t *testing.T, payload []byte) []byte {
	t.Helper()
	zipped, err := base64.StdEncoding.DecodeString(string(payload))
	if err != nil {
		t.Fatal(err)
	}
	r, err := gzip.NewReader(bytes.NewReader(zipped))
	if err != nil {
		t.Fatalf("not gzip: %v", err)
	}
	raw, err := io.ReadAll(r)
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

// Records are compressed fast; a big one as hard as Helm does, so that whatever fits Helm's
// storage fits rudder's.
func TestRecordCompression(t *testing.T) {
	t.Parallel()
	// gzip's header says how hard its writer tried: 4 at BestSpeed, 2 at BestCompression.
	level := func(rls *release.Release) (byte, int) {
		payload, err := encodeRelease(rls)
		if err != nil {
			t.Fatal(err)
		}
		zipped, err := base64.StdEncoding.DecodeString(string(payload))
		if err != nil {
			t.Fatal(err)
		}
		return zipped[8], len(zipped)
	}
	if xfl, _ := level(testRelease(1, common.StatusDeployed)); xfl != 4 {
		t.Errorf("a small record's gzip header has XFL %d, want 4 (fastest)", xfl)
	}
	big := testRelease(1, common.StatusDeployed)
	rnd := rand.New(rand.NewPCG(1, 2))
	text := make([]byte, 2*bigRecord)
	for i := range text {
		text[i] = "abcdefghijklmnopqrstuvwxyz234567\n"[rnd.IntN(33)]
	}
	big.Manifest = string(text)
	xfl, n := level(big)
	if xfl != 2 {
		t.Errorf("a big record's gzip header has XFL %d, want 2 (best compression)", xfl)
	}
	if n <= bigRecord {
		t.Errorf("the big record compressed to %d bytes: not big", n)
	}
}
