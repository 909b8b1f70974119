package controllers_test

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rudder-operator/rudder/internal/chartsource/chartsourcetest"
	"github.com/rudder-operator/rudder/internal/crtest"
	"github.com/rudder-operator/rudder/internal/helm/helmtest"
)

var leakGVK = schema.GroupVersionKind{Group: "test.rudder.dev", Version: "v1", Kind: "LeakProbe"}

// TestChartReadsOnlyItself points the leaky chart (it ships files/ as a ConfigMap, the way
// public charts ship config files) at rudder's credentials and process, six ways, as a chart
// committed to a git-sync volume can: each edit is refused as ChartInvalid on every CR of the
// kind, naming the file and where it points; the last good chart stays in use (no revision);
// nothing of the admin kubeconfig rudder runs on, nor of its environment, reaches the
// cluster; no schema reference is fetched; and rudder serves other kinds throughout.
func TestChartReadsOnlyItself(t *testing.T) {
	ctx := context.Background()
	ns := crtest.NewNamespace(t, k8s, "t-")
	crs := []string{"l1", "l2"}
	for _, n := range crs {
		if err := k8s.Create(ctx, crtest.NewCR(leakGVK, ns, n, nil)); err != nil {
			t.Fatal(err)
		}
	}
	for _, n := range crs {
		crtest.WaitCondition(t, k8s, leakGVK, ns, n, "Ready", metav1.ConditionTrue, "", timeout)
	}
	secrets := leakNeedles(t)

	var requests atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		requests.Add(1)
		fmt.Fprint(w, `{"definitions": {"port": {"type": "integer"}}}`)
	}))
	defer srv.Close()
	bomb, err := chartsourcetest.ArchiveBomb("bomb", 2<<30)
	if err != nil {
		t.Fatal(err)
	}

	vol := filepath.Join(chartDir, "leaky")
	kubeconfig := cluster.Kubeconfig
	attacks := []struct {
		name string
		// lay edits the chart at vol into the attack.
		lay func(t *testing.T)
		// says is what the CRs' ChartReady message must say.
		says []string
	}{
		{"a file links to the kubeconfig", func(t *testing.T) {
			symlink(t, kubeconfig, filepath.Join(vol, "files", "creds"))
		}, []string{"files/creds is a symlink to " + kubeconfig, "outside the chart's directory"}},
		{"files/ links to the kubeconfig's directory", func(t *testing.T) {
			if err := os.RemoveAll(filepath.Join(vol, "files")); err != nil {
				t.Fatal(err)
			}
			symlink(t, filepath.Dir(kubeconfig), filepath.Join(vol, "files"))
		}, []string{"files is a symlink to " + filepath.Dir(kubeconfig)}},
		{"a relative link climbs out of the chart", func(t *testing.T) {
			rel, err := filepath.Rel(filepath.Join(vol, "files"), kubeconfig)
			if err != nil {
				t.Fatal(err)
			}
			symlink(t, rel, filepath.Join(vol, "files", "creds"))
		}, []string{"files/creds is a symlink to " + kubeconfig}},
		{"a file links to rudder's environment", func(t *testing.T) {
			symlink(t, "/proc/self/environ", filepath.Join(vol, "files", "env"))
		}, []string{"files/env is a symlink to /proc/", "into /proc"}},
		{"the schema refers to a device and to a URL", func(t *testing.T) {
			for _, ref := range []string{"file:///dev/zero", srv.URL + "/defs.json"} {
				schema := `{"properties": {"port": {"$ref": "` + ref + `"}}}`
				if err := os.WriteFile(filepath.Join(vol, "values.schema.json"), []byte(schema), 0o644); err != nil {
					t.Fatal(err)
				}
				for _, n := range crs {
					chartInvalid(t, ns, n, ref, "resolves only to the chart's own files")
				}
			}
		}, nil},
		{"a subchart archive inflates to 2 GiB", func(t *testing.T) {
			if err := os.MkdirAll(filepath.Join(vol, "charts"), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(vol, "charts", "bomb-0.1.0.tgz"), bomb, 0o644); err != nil {
				t.Fatal(err)
			}
		}, []string{"decompressed chart is larger than the maximum size"}},
	}
	pristine, err := chartsourcetest.ReadDir(vol)
	if err != nil {
		t.Fatal(err)
	}
	for i, a := range attacks {
		a.lay(t)
		for _, n := range crs {
			chartInvalid(t, ns, n, a.says...)
		}
		// rudder serves other kinds meanwhile.
		w := fmt.Sprintf("w%d", i)
		if err := k8s.Create(ctx, crtest.NewCR(widgetGVK, ns, w, map[string]any{"message": w})); err != nil {
			t.Fatal(err)
		}
		crtest.WaitCondition(t, k8s, widgetGVK, ns, w, "Ready", metav1.ConditionTrue, "", timeout)
		noLeak(t, ns, crs, secrets)

		restore(t, vol, pristine)
		for _, n := range crs {
			crtest.WaitCondition(t, k8s, leakGVK, ns, n, "ChartReady", metav1.ConditionTrue, "", timeout)
		}
		t.Logf("%s: refused", a.name)
	}
	for _, n := range crs {
		if h := helmtest.History(t, cluster.Kubeconfig, ns, n); len(h) != 1 {
			t.Errorf("%s: the refused charts made revisions: %s", n, describe(h))
		}
	}
	if n := requests.Load(); n != 0 {
		t.Fatalf("a schema's $ref made %d requests", n)
	}
}

// chartInvalid waits for ChartReady=False (ChartInvalid) on the LeakProbe n, with a message
// that says each of says.
func chartInvalid(t *testing.T, ns, n string, says ...string) {
	t.Helper()
	crtest.Eventually(t, n+" to say the chart is invalid: "+strings.Join(says, ", "), timeout, func(ctx context.Context) (bool, error) {
		u, err := crtest.Get(ctx, k8s, leakGVK, ns, n)
		if err != nil {
			return false, err
		}
		c := crtest.Condition(u, "ChartReady")
		if c == nil || c.Status != metav1.ConditionFalse || c.Reason != "ChartInvalid" {
			return false, nil
		}
		for _, s := range says {
			if !strings.Contains(c.Message, s) {
				return false, nil
			}
		}
		return true, nil
	})
}

func symlink(t *testing.T, target, link string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(link), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
}

// restore lays the chart at vol out as files (path → content) again, nothing else in it.
func restore(t *testing.T, vol string, files map[string]string) {
	t.Helper()
	entries, err := os.ReadDir(vol)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if err := os.RemoveAll(filepath.Join(vol, e.Name())); err != nil {
			t.Fatal(err)
		}
	}
	for name, content := range files {
		p := filepath.Join(vol, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// leakNeedles are what must not reach the cluster: the admin kubeconfig's private key, and an
// entry of this process's environment as /proc/self/environ shows it (rudder runs in it).
func leakNeedles(t *testing.T) map[string]string {
	t.Helper()
	cfg, err := clientcmd.LoadFromFile(cluster.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	needles := map[string]string{}
	for name, a := range cfg.AuthInfos {
		if len(a.ClientKeyData) > 0 {
			needles["the kubeconfig's key of "+name] = string(bytes.TrimSpace(a.ClientKeyData))
		}
	}
	environ, err := os.ReadFile("/proc/self/environ")
	if err != nil {
		t.Fatal(err)
	}
	for _, kv := range bytes.Split(environ, []byte{0}) {
		if bytes.HasPrefix(kv, []byte("PATH=")) {
			needles["rudder's environment"] = string(kv)
		}
	}
	if len(needles) < 2 {
		t.Fatalf("no key in the kubeconfig or no PATH in the environment: %v", needles)
	}
	return needles
}

// noLeak fails when any ConfigMap or Secret of the cluster, or any revision of the crs'
// releases (their manifests and the chart files Helm keeps), holds one of needles.
func noLeak(t *testing.T, ns string, crs []string, needles map[string]string) {
	t.Helper()
	ctx := context.Background()
	var places []string
	var blobs []string
	var cms corev1.ConfigMapList
	if err := k8s.List(ctx, &cms); err != nil {
		t.Fatal(err)
	}
	for _, cm := range cms.Items {
		for k, v := range cm.Data {
			places, blobs = append(places, "ConfigMap "+cm.Namespace+"/"+cm.Name+" "+k), append(blobs, v)
		}
	}
	var secrets corev1.SecretList
	if err := k8s.List(ctx, &secrets, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	for _, s := range secrets.Items {
		for k, v := range s.Data {
			places, blobs = append(places, "Secret "+s.Namespace+"/"+s.Name+" "+k), append(blobs, string(v))
		}
	}
	for _, n := range crs {
		for _, rel := range helmtest.History(t, cluster.Kubeconfig, ns, n) {
			places, blobs = append(places, fmt.Sprintf("%s revision %d manifest", n, rel.Version)), append(blobs, rel.Manifest)
			for _, f := range rel.Chart.Files {
				places, blobs = append(places, fmt.Sprintf("%s revision %d file %s", n, rel.Version, f.Name)), append(blobs, string(f.Data))
			}
		}
	}
	for what, needle := range needles {
		for i, b := range blobs {
			if strings.Contains(b, needle) {
				t.Errorf("%s is in %s", what, places[i])
			}
		}
	}
}
