// Package faults_test runs rudder as its own process (built from this checkout by TestMain)
// against the local control plane and hurts it: SIGKILLs of rudder in the middle of installs
// and upgrades, kube-apiserver and etcd killed and restarted, and the loss of the leader among
// replicas. After each fault every release must end on its CR's last
// spec, with nothing pending, an intact history and every CR Ready.
package faults_test

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"helm.sh/helm/v4/pkg/release/common"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rudder-operator/rudder/internal/chartsource/chartsourcetest"
	"github.com/rudder-operator/rudder/internal/crtest"
	"github.com/rudder-operator/rudder/internal/helm/helmtest"
	"github.com/rudder-operator/rudder/internal/testcluster"
	"github.com/rudder-operator/rudder/internal/wiring"
)

var (
	cluster *testcluster.Cluster
	k8s     client.Client
	binary  string // bin/rudder built from this checkout
	watches string // watches.yaml for the Web kind (the bench chart: a Deployment and a Service)
	// previousWatches are the watches the previous version of rudder knows the fields of (no
	// rollout policy): TestUpgradeOfRudderKeepsEveryState runs it with them.
	previousWatches string
	// rolloutChart and shardedChart are the RolloutProbe and PausedProbe kinds' charts,
	// volumes TestSIGKILLMidWave and TestRolloutPerShard edit.
	rolloutChart, shardedChart string
	root                       string // the repository
	// suiteDir is the suite's own directory, removed when it ends.
	suiteDir string
	webGVK   = schema.GroupVersionKind{Group: "bench.rudder.dev", Version: "v1", Kind: "Web"}
)

func TestMain(m *testing.M) {
	os.Exit(crtest.Main(m, crtest.Suite{
		Scheme: wiring.Scheme(),
		Options: func(o *testcluster.Options, root string) {
			o.CRDDirectoryPaths = []string{filepath.Join(root, "internal/bench/testdata/crds/web.yaml"),
				filepath.Join(root, "controllers/testdata/crds/tenantbox.yaml"), filepath.Join(root, "controllers/testdata/crds/testprobe.yaml"),
				filepath.Join(root, "controllers/testdata/crds/retryprobe.yaml"), filepath.Join(root, "controllers/testdata/crds/rolloutprobe.yaml"),
				filepath.Join(root, "controllers/testdata/crds/pausedprobe.yaml"),
				filepath.Join(root, "config/crd/bases/rudder.dev_rollouts.yaml")}
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
	suiteDir = tmp
	if binary, err = crtest.BuildRudder(e.Root, tmp); err != nil {
		return nil, err
	}
	watches = filepath.Join(tmp, "watches.yaml")
	chart := filepath.Join(e.Root, "internal/bench/testdata/charts/web")
	box := filepath.Join(e.Root, "controllers/testdata/charts/tenantbox")
	tested := filepath.Join(e.Root, "controllers/testdata/charts/tested")
	day2 := filepath.Join(e.Root, "controllers/testdata/charts/day2")
	rolloutChart = filepath.Join(tmp, "rollout")
	files, err := chartsourcetest.ReadDir(day2)
	if err != nil {
		return nil, err
	}
	shardedChart = filepath.Join(tmp, "sharded")
	for _, vol := range []string{rolloutChart, shardedChart} {
		if err := chartsourcetest.PublishAtomic(vol, files); err != nil {
			return nil, err
		}
	}
	base := "- {group: bench.rudder.dev, version: v1, kind: Web, chart: " + chart + "}\n" +
		"- {group: test.rudder.dev, version: v1, kind: TenantBox, chart: " + box + "}\n" +
		"- {group: test.rudder.dev, version: v1, kind: TestProbe, chart: " + tested + ", test: {enable: true}}\n" +
		"- {group: test.rudder.dev, version: v1, kind: RetryProbe, chart: " + day2 + ", remediation: {retries: 2}}\n"
	previousWatches = filepath.Join(tmp, "watches-previous.yaml")
	if err := os.WriteFile(previousWatches, []byte(base), 0o644); err != nil {
		return nil, err
	}
	if err := os.WriteFile(watches, []byte(base+
		"- {group: test.rudder.dev, version: v1, kind: RolloutProbe, chart: "+rolloutChart+", rollout: {waves: [{count: 1}], settle: 2s}}\n"+
		"- {group: test.rudder.dev, version: v1, kind: PausedProbe, chart: "+shardedChart+", rollout: {waves: [{count: 1}]}}\n"), 0o644); err != nil {
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
	return startBinary(t, name, binary, extra...)
}

// startBinary is start for the rudder binary bin.
func startBinary(t *testing.T, name, bin string, extra ...string) *replica {
	t.Helper()
	return startEnv(t, name, bin, nil, extra...)
}

// startEnv is startBinary with env added to the test's environment.
func startEnv(t *testing.T, name, bin string, env []string, extra ...string) *replica {
	t.Helper()
	log := filepath.Join(t.TempDir(), name+".log")
	f, err := os.Create(log)
	if err != nil {
		t.Fatal(err)
	}
	args := append([]string{"--kubeconfig", cluster.Kubeconfig, "--watches-file", watches,
		"--metrics-bind-address", "0", "--health-probe-bind-address", "0", "--reconcile-period", "10s"}, extra...)
	cmd := exec.Command(bin, args...)
	if env != nil {
		cmd.Env = append(os.Environ(), env...)
	}
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
		h := helmtest.History(t, cluster.Kubeconfig, ns, n)
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
			case common.StatusPendingInstall, common.StatusPendingUpgrade, common.StatusPendingRollback:
				t.Errorf("%s: revision %d is %s", n, r.Version, r.Info.Status)
			case common.StatusDeployed:
				deployed++
			}
			if r.Version > newest.Version {
				newest = r
			}
		}
		if deployed != 1 || newest.Info.Status != common.StatusDeployed {
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
// or upgrades, keeps it down for a few seconds and starts it again. Each kill is checked to
// have landed in the middle of the work (killMidWork), and made again on new work otherwise.
func TestControlPlaneRestarts(t *testing.T) {
	crtest.NeedsCluster(t)
	start(t, "rudder")
	var ns string
	var names []string
	killMidWork(t, "kube-apiserver", func() map[string]int {
		ns = crtest.NewNamespace(t, k8s, "faults-")
		names = createWebs(t, ns, 10, 1)
		return every(names, 1)
	}, func() string { return ns })
	converged(t, ns, names, 1)

	replicas := int64(1)
	killMidWork(t, "etcd", func() map[string]int {
		converged(t, ns, names, replicas) // the work of a try that missed is over first
		// Each release from its own newest revision on: an install the kill of
		// kube-apiserver failed was followed by another, so the histories differ in length.
		to := map[string]int{}
		for _, n := range names {
			to[n] = newestRevision(t, ns, n) + 1
		}
		replicas++
		setReplicas(t, ns, names, replicas)
		return to
	}, func() string { return ns })
	converged(t, ns, names, replicas)
}

// every is the revision each of names moves to or past: the same for all.
func every(names []string, revision int) map[string]int {
	to := make(map[string]int, len(names))
	for _, n := range names {
		to[n] = revision
	}
	return to
}

// killMidWork starts work (which returns, for each release, the revision it moves to, or past:
// a revision the kill failed is followed by another), waits until it is under way (a record of
// such a revision stored) and kills the control-plane component proc while it is (not every
// release there yet), keeping it down 3 s. The kill landed in the middle of the work when a
// record of such a revision was stored or updated after the restart too; otherwise (the work
// was over before the kill, or done before it took effect) the work is started again, up to
// three times.
func killMidWork(t *testing.T, proc string, work func() (to map[string]int), namespace func() string) {
	t.Helper()
	const tries = 3
	for try := 1; ; try++ {
		to := work()
		ns := namespace()
		if !underWay(t, ns, to) {
			t.Logf("try %d: the work was over before %s could be killed", try, proc)
		} else {
			if err := cluster.KillAndRestart(context.Background(), proc, 3*time.Second); err != nil {
				t.Fatal(err)
			}
			if !cluster.Running(proc) {
				t.Fatalf("%s was not restarted by the test", proc)
			}
			up := time.Now()
			// As patient as converged: a CR whose passes failed while the API server was down
			// waits out its back-off first.
			crtest.Eventually(t, "every release deployed at the revision it moves to, or after", 10*time.Minute, func(context.Context) (bool, error) {
				if r := records(t, ns, to); r.deployed != len(to) {
					return false, fmt.Errorf("not yet: %s", strings.Join(r.behind, "; "))
				}
				return true, nil
			})
			if records(t, ns, to).newest.After(up.Add(-time.Second)) {
				return // a record was stored or updated after the restart: the kill was in the middle
			}
			t.Logf("try %d: every record of the work was stored before %s was killed", try, proc)
		}
		if try == tries {
			t.Fatalf("%d tries, and no kill of %s landed in the middle of the work", tries, proc)
		}
	}
}

// underWay waits until a release has a record of the revision it moves to (or after) and
// reports true if, then, not every one is deployed there yet.
func underWay(t *testing.T, ns string, to map[string]int) bool {
	t.Helper()
	var r revisionRecords
	err := wait.PollUntilContextTimeout(context.Background(), 10*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		r = records(t, ns, to)
		return r.deployed == len(to) || r.stored > 0, nil
	})
	if err != nil {
		t.Fatalf("no release of namespace %s reached the revision it moves to in a minute: %v", ns, to)
	}
	return r.deployed != len(to)
}

// revisionRecords counts the release records of a namespace, each release's from the revision
// it moves to on.
type revisionRecords struct {
	// stored counts the records of those revisions; deployed the releases whose newest record
	// is one of them, deployed.
	stored, deployed int
	// behind names the releases not deployed at such a revision yet, with their newest
	// record's revision and status.
	behind []string
	// newest is when the newest of them was stored or updated (to the second).
	newest time.Time
}

// records counts the records of the releases to names, from the revision each moves to on.
func records(t *testing.T, ns string, to map[string]int) revisionRecords {
	t.Helper()
	var list corev1.SecretList
	if err := k8s.List(context.Background(), &list, client.InNamespace(ns), client.MatchingLabels{"owner": "helm"}); err != nil {
		t.Fatal(err)
	}
	var r revisionRecords
	newestOf := map[string]*corev1.Secret{}
	for i := range list.Items {
		s := &list.Items[i]
		from, ok := to[s.Labels["name"]]
		v, _ := strconv.Atoi(s.Labels["version"])
		if n := newestOf[s.Labels["name"]]; ok && (n == nil || v > atoi(n.Labels["version"])) {
			newestOf[s.Labels["name"]] = s
		}
		if !ok || v < from {
			continue
		}
		r.stored++
		// Stored (createdAt) or updated (modifiedAt, a pending revision marked deployed), as
		// Helm's Secret driver stamps them, in seconds.
		for _, stamp := range []string{"createdAt", "modifiedAt"} {
			if sec, err := strconv.ParseInt(s.Labels[stamp], 10, 64); err == nil && time.Unix(sec, 0).After(r.newest) {
				r.newest = time.Unix(sec, 0)
			}
		}
	}
	for _, name := range slices.Sorted(maps.Keys(to)) {
		s := newestOf[name]
		switch {
		case s == nil:
			r.behind = append(r.behind, name+": no record")
		case atoi(s.Labels["version"]) >= to[name] && s.Labels["status"] == common.StatusDeployed.String():
			r.deployed++
		default:
			r.behind = append(r.behind, fmt.Sprintf("%s: %s at revision %s, moving to %d", name, s.Labels["status"], s.Labels["version"], to[name]))
		}
	}
	return r
}

func atoi(s string) int {
	n, _ := strconv.Atoi(s)
	return n
}

// newestRevision is the newest revision of a release.
func newestRevision(t *testing.T, ns, name string) int {
	t.Helper()
	n := 0
	for _, r := range helmtest.History(t, cluster.Kubeconfig, ns, name) {
		n = max(n, r.Version)
	}
	return n
}
