// Package faults_test runs rudder as its own process (built from this checkout by TestMain)
// against the local control plane and hurts it: SIGKILLs of rudder in the middle of installs
// and upgrades, kube-apiserver and etcd killed and restarted, and the loss of the leader among
// replicas. After each fault every release must end on its CR's last
// spec, with nothing pending, an intact history and every CR Ready.
package faults_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"helm.sh/helm/v3/pkg/release"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rudder-operator/rudder/controllers"
	"github.com/rudder-operator/rudder/internal/crtest"
	"github.com/rudder-operator/rudder/internal/testcluster"
)

var (
	cluster *testcluster.Cluster
	k8s     client.Client
	binary  string // bin/rudder built from this checkout
	watches string // watches.yaml for the Web kind (the bench chart: a Deployment and a Service)
	root    string // the repository
	webGVK  = schema.GroupVersionKind{Group: "bench.rudder.dev", Version: "v1", Kind: "Web"}
)

func TestMain(m *testing.M) {
	os.Exit(crtest.Main(m, crtest.Suite{
		Scheme: controllers.Scheme(),
		Options: func(o *testcluster.Options, root string) {
			o.CRDDirectoryPaths = []string{filepath.Join(root, "internal/bench/testdata/crds/web.yaml"),
				filepath.Join(root, "controllers/testdata/crds/tenantbox.yaml"), filepath.Join(root, "controllers/testdata/crds/testprobe.yaml"),
				filepath.Join(root, "controllers/testdata/crds/retryprobe.yaml")}
		},
		Setup: setup,
	}))
}

// setup builds bin/rudder from this checkout and writes the Web watch.
func setup(e *crtest.Env) (func() error, error) {
	cluster, k8s, root = e.Cluster, e.Client, e.Root
	tmp, err := os.MkdirTemp("", "rudder-faults-")
	if err != nil {
		return nil, err
	}
	if binary, err = crtest.BuildRudder(e.Root, tmp); err != nil {
		return nil, err
	}
	watches = filepath.Join(tmp, "watches.yaml")
	chart := filepath.Join(e.Root, "internal/bench/testdata/charts/web")
	box := filepath.Join(e.Root, "controllers/testdata/charts/tenantbox")
	tested := filepath.Join(e.Root, "controllers/testdata/charts/tested")
	day2 := filepath.Join(e.Root, "controllers/testdata/charts/day2")
	if err := os.WriteFile(watches, []byte("- {group: bench.rudder.dev, version: v1, kind: Web, chart: "+chart+"}\n"+
		"- {group: test.rudder.dev, version: v1, kind: TenantBox, chart: "+box+"}\n"+
		"- {group: test.rudder.dev, version: v1, kind: TestProbe, chart: "+tested+", test: {enable: true}}\n"+
		"- {group: test.rudder.dev, version: v1, kind: RetryProbe, chart: "+day2+", remediation: {retries: 2}}\n"), 0o644); err != nil {
		return nil, err
	}
	return func() error { return os.RemoveAll(tmp) }, nil
}

// replica is one rudder process.
type replica struct {
	cmd  *exec.Cmd
	log  string
	done chan struct{}
}

// start runs bin/rudder with the Web watch against the cluster; its log goes to a file.
func start(t *testing.T, name string, extra ...string) *replica {
	t.Helper()
	log := filepath.Join(t.TempDir(), name+".log")
	f, err := os.Create(log)
	if err != nil {
		t.Fatal(err)
	}
	args := append([]string{"--kubeconfig", cluster.Kubeconfig, "--watches-file", watches,
		"--metrics-bind-address", "0", "--health-probe-bind-address", "0", "--reconcile-period", "10s"}, extra...)
	cmd := exec.Command(binary, args...)
	cmd.Stdout, cmd.Stderr = f, f
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	r := &replica{cmd: cmd, log: log, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); f.Close(); close(r.done) }()
	t.Cleanup(func() {
		r.kill()
		if t.Failed() {
			t.Logf("--- log of %s (last lines)\n%s", name, tail(r.logs()))
		}
	})
	return r
}

// kill SIGKILLs the process, as the kernel's OOM killer or a node failure would, and waits.
func (r *replica) kill() {
	_ = r.cmd.Process.Signal(syscall.SIGKILL)
	<-r.done
}

func (r *replica) logs() string {
	b, _ := os.ReadFile(r.log)
	return string(b)
}

func createWebs(t *testing.T, ns string, n int, replicas int64) []string {
	t.Helper()
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("w%02d", i)
		createWeb(t, ns, names[i], "", replicas)
	}
	return names
}

// setReplicas changes every Web's spec: an upgrade for each.
func setReplicas(t *testing.T, ns string, names []string, replicas int64) {
	t.Helper()
	for _, n := range names {
		u, err := crtest.Get(context.Background(), k8s, webGVK, ns, n)
		if err != nil {
			t.Fatal(err)
		}
		if err := unstructured.SetNestedField(u.Object, replicas, "spec", "replicas"); err != nil {
			t.Fatal(err)
		}
		if err := k8s.Update(context.Background(), u); err != nil {
			t.Fatal(err)
		}
	}
}

// converged asserts, for every Web: Ready for its current generation; the release's newest
// revision deployed from its last spec; no revision pending; revision numbers without
// repeats; and exactly one deployed revision.
func converged(t *testing.T, ns string, names []string, replicas int64) {
	t.Helper()
	for _, n := range names {
		crtest.WaitCondition(t, k8s, webGVK, ns, n, "Ready", metav1.ConditionTrue, "", 3*time.Minute)
	}
	for _, n := range names {
		h := crtest.History(t, cluster, ns, n)
		if len(h) == 0 {
			t.Fatalf("%s: no release", n)
		}
		seen := map[int]bool{}
		deployed, newest := 0, h[0]
		for _, r := range h {
			if seen[r.Version] {
				t.Errorf("%s: revision %d stored twice", n, r.Version)
			}
			seen[r.Version] = true
			switch r.Info.Status {
			case release.StatusPendingInstall, release.StatusPendingUpgrade, release.StatusPendingRollback:
				t.Errorf("%s: revision %d is %s", n, r.Version, r.Info.Status)
			case release.StatusDeployed:
				deployed++
			}
			if r.Version > newest.Version {
				newest = r
			}
		}
		if deployed != 1 || newest.Info.Status != release.StatusDeployed {
			t.Errorf("%s: %d deployed revisions; newest %d is %s", n, deployed, newest.Version, newest.Info.Status)
		}
		if got, _ := newest.Config["replicas"].(float64); int64(got) != replicas {
			t.Errorf("%s: newest revision %d has replicas %v, the spec says %d", n, newest.Version, newest.Config["replicas"], replicas)
		}
	}
}

// TestSIGKILLDuringInstallsAndUpgrades kills rudder ten times while 20 CRs install and then
// upgrade twice, restarting it each time.
func TestSIGKILLDuringInstallsAndUpgrades(t *testing.T) {
	ns := crtest.NewNamespace(t, k8s, "faults-")
	r := start(t, "rudder-0")
	names := createWebs(t, ns, 20, 1)
	replicas := int64(1)
	kills := 0
	for i := range 10 {
		if i == 3 || i == 6 {
			replicas++
			setReplicas(t, ns, names, replicas)
		}
		time.Sleep(time.Duration(200+rand.IntN(700)) * time.Millisecond) // a random point of the work
		r.kill()
		kills++
		r = start(t, fmt.Sprintf("rudder-%d", i+1))
	}
	if kills != 10 {
		t.Fatalf("%d kills", kills)
	}
	converged(t, ns, names, replicas)
}

// TestLeaderFailover runs two replicas with --leader-elect; SIGKILLing the leader hands the work
// to the other, which converges CRs created and changed after the kill.
func TestLeaderFailover(t *testing.T) {
	ns := crtest.NewNamespace(t, k8s, "faults-")
	extra := []string{"--leader-elect", "--leader-election-namespace", "default", "--leader-election-id", "faults-failover"}
	a, b := start(t, "a", extra...), start(t, "b", extra...)
	names := createWebs(t, ns, 10, 1)
	converged(t, ns, names, 1)

	leader, follower := a, b
	if !leads(a) {
		leader, follower = b, a
	}
	if !leads(leader) || leads(follower) {
		t.Fatalf("want exactly one leader:\n--- a\n%s\n--- b\n%s", tail(a.logs()), tail(b.logs()))
	}
	leader.kill()
	setReplicas(t, ns, names, 2)
	ns2 := crtest.NewNamespace(t, k8s, "faults-")
	later := createWebs(t, ns2, 5, 2)
	converged(t, ns, names, 2)
	converged(t, ns2, later, 2)
	if !leads(follower) {
		t.Fatalf("the CRs converged, but the follower's log does not say it leads:\n%s", tail(follower.logs()))
	}
}

// leads reports whether a replica's log says it acquired the leader Lease.
func leads(r *replica) bool {
	return strings.Contains(r.logs(), "Successfully acquired lease")
}

func tail(s string) string {
	if len(s) > 6000 {
		return s[len(s)-6000:]
	}
	return s
}

// TestControlPlaneRestarts SIGKILLs kube-apiserver, then etcd, each in the middle of installs
// or upgrades, keeps it down for a few seconds and starts it again.
func TestControlPlaneRestarts(t *testing.T) {
	ns := crtest.NewNamespace(t, k8s, "faults-")
	start(t, "rudder")
	names := createWebs(t, ns, 10, 1)
	ctx := context.Background()
	time.Sleep(300 * time.Millisecond) // a point in the middle of the installs
	if err := cluster.KillAndRestart(ctx, "kube-apiserver", 3*time.Second); err != nil {
		t.Fatal(err)
	}
	if !cluster.Running("kube-apiserver") {
		t.Fatal("kube-apiserver was not restarted by the test")
	}
	converged(t, ns, names, 1)

	setReplicas(t, ns, names, 2)
	time.Sleep(300 * time.Millisecond) // in the middle of the upgrades
	if err := cluster.KillAndRestart(ctx, "etcd", 3*time.Second); err != nil {
		t.Fatal(err)
	}
	if !cluster.Running("etcd") {
		t.Fatal("etcd was not restarted by the test")
	}
	converged(t, ns, names, 2)
}
