package faults_test

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	rstatus "github.com/rudder-operator/rudder/api/status"
	"github.com/rudder-operator/rudder/internal/crtest"
	"github.com/rudder-operator/rudder/internal/helm/helmtest"
	"github.com/rudder-operator/rudder/internal/machine"
)

// TestUpgradeOfRudderKeepsEveryState: the rudder of hack/previous-version (the last version
// users run) brings CRs into each state of the decision table — in sync, a failed install
// and a failed upgrade held back, paused over a spec change, rolled back on request, tested —
// and stops, as a Deployment's rollout stops it; this checkout's rudder then takes every CR
// over with the same conditions (type, status, reason), the same status.release and
// observedGeneration, and the same history: no new revision, no test run again.
func TestUpgradeOfRudderKeepsEveryState(t *testing.T) {
	crtest.NeedsCluster(t)
	takeoverKeepsEveryState(t, "faults-upgrade-",
		rudderVersion{"rudder-previous", previousRudder(t), previousWatches}, rudderVersion{"rudder-new", binary, watches})
}

// TestDowngradeOfRudderKeepsEveryState: the same the other way: what this checkout's rudder
// leaves, the previous version takes over as it is, so that a rollout of this version can be
// undone (kubectl rollout undo) without a new revision, a test run again or a condition
// changed.
func TestDowngradeOfRudderKeepsEveryState(t *testing.T) {
	crtest.NeedsCluster(t)
	takeoverKeepsEveryState(t, "faults-downgrade-",
		rudderVersion{"rudder-new", binary, watches}, rudderVersion{"rudder-previous", previousRudder(t), previousWatches})
}

// rudderVersion is a rudder binary and the watches it runs with.
type rudderVersion struct {
	name, binary, watches string
}

// takeoverKeepsEveryState: first brings CRs into each state of the decision table and stops;
// then takes every CR over with the same conditions, status.release, observedGeneration and
// history.
func takeoverKeepsEveryState(t *testing.T, prefix string, first, then rudderVersion) {
	t.Helper()
	ctx := context.Background()
	ns := crtest.NewNamespace(t, k8s, prefix)
	// Both serve this namespace alone: every pass the second one counts is one of these CRs.
	old := startBinary(t, first.name, first.binary, "--watch-namespace", ns, "--watches-file", first.watches)

	type cr struct {
		gvk  schema.GroupVersionKind
		name string
	}
	crs := []cr{{webGVK, "in-sync"}, {webGVK, "install-failed"}, {webGVK, "upgrade-failed"}, {webGVK, "paused"},
		{webGVK, "rolled-back"}, {testProbeGVK, "tested"}}
	for _, c := range crs {
		spec := map[string]any{"replicas": int64(1)}
		switch c.name {
		case "install-failed":
			spec["port"] = int64(70000) // the API server refuses the Deployment
		case "tested":
			spec = map[string]any{"message": "one"}
		}
		if err := k8s.Create(ctx, crtest.NewCR(c.gvk, ns, c.name, spec)); err != nil {
			t.Fatal(err)
		}
	}
	wait := func(c cr, typ string, status metav1.ConditionStatus, reason string) *unstructured.Unstructured {
		return crtest.WaitCondition(t, k8s, c.gvk, ns, c.name, typ, status, reason, timeout)
	}
	wait(crs[0], rstatus.TypeReady, metav1.ConditionTrue, "")
	wait(crs[1], rstatus.TypeStalled, metav1.ConditionTrue, rstatus.ReasonInstallFailed)
	wait(crs[5], rstatus.TypeTested, metav1.ConditionTrue, rstatus.ReasonTestSucceeded)
	for _, c := range crs[2:5] {
		wait(c, rstatus.TypeReady, metav1.ConditionTrue, "")
	}
	crtest.Update(t, k8s, webGVK, ns, "upgrade-failed", func(u *unstructured.Unstructured) {
		u.Object["spec"] = map[string]any{"replicas": int64(1), "port": int64(70000)}
	})
	crtest.Update(t, k8s, webGVK, ns, "paused", func(u *unstructured.Unstructured) {
		u.SetAnnotations(map[string]string{machine.AnnotationPaused: "true"})
	})
	wait(crs[3], rstatus.TypePaused, metav1.ConditionTrue, rstatus.ReasonPaused)
	crtest.Update(t, k8s, webGVK, ns, "paused", func(u *unstructured.Unstructured) {
		u.Object["spec"] = map[string]any{"replicas": int64(2)}
	})
	crtest.Update(t, k8s, webGVK, ns, "rolled-back", func(u *unstructured.Unstructured) {
		u.Object["spec"] = map[string]any{"replicas": int64(2)}
	})
	crtest.Eventually(t, "rolled-back upgraded to revision 2", timeout, func(ctx context.Context) (bool, error) {
		return len(helmtest.History(t, cluster.Kubeconfig, ns, "rolled-back")) == 2, nil
	})
	wait(crs[4], rstatus.TypeReady, metav1.ConditionTrue, "")
	crtest.Update(t, k8s, webGVK, ns, "rolled-back", func(u *unstructured.Unstructured) {
		u.SetAnnotations(map[string]string{machine.AnnotationRollbackTo: "1"})
	})
	wait(crs[2], rstatus.TypeStalled, metav1.ConditionTrue, rstatus.ReasonUpgradeFailed)
	crtest.Eventually(t, "the paused CR's spec change seen, and the rollback done", timeout, func(ctx context.Context) (bool, error) {
		p, err := crtest.Get(ctx, k8s, webGVK, ns, "paused")
		if err != nil {
			return false, err
		}
		r, err := crtest.Get(ctx, k8s, webGVK, ns, "rolled-back")
		if err != nil {
			return false, err
		}
		handled, _, _ := unstructured.NestedString(r.Object, "status", "release", "rollbackRequest")
		ready := crtest.Condition(r, rstatus.TypeReady)
		paused := crtest.Condition(p, rstatus.TypeReconciling)
		return handled == "1" && ready != nil && ready.Status == metav1.ConditionTrue && ready.ObservedGeneration == r.GetGeneration() &&
			paused != nil && paused.ObservedGeneration == p.GetGeneration(), nil
	})

	// What the first version leaves, once its passes are over: SIGTERM, as a rollout sends.
	_ = old.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-old.done:
	case <-time.After(time.Minute):
		t.Fatalf("%s did not stop within a minute of SIGTERM", first.name)
	}
	before := map[string]takeover{}
	for _, c := range crs {
		before[c.name] = takeoverOf(t, c.gvk, ns, c.name)
	}

	metrics := "127.0.0.1:" + freePort(t)
	startBinary(t, then.name, then.binary, "--watch-namespace", ns, "--watches-file", then.watches,
		"--metrics-bind-address", metrics, "--metrics-secure=false")
	// Every CR passed by the second process (its state gauge names it), and then a reconcile
	// period of passes over all of them (--reconcile-period 10s: three rounds of the six).
	crtest.Eventually(t, then.name+"'s passes over every CR", 2*timeout, func(ctx context.Context) (bool, error) {
		seen, passes, err := passesOf(metrics, ns)
		if err != nil {
			return false, nil // not serving yet
		}
		for _, c := range crs {
			if !seen[c.name] {
				return false, nil
			}
		}
		return passes >= float64(3*len(crs)), nil
	})
	for _, c := range crs {
		after := takeoverOf(t, c.gvk, ns, c.name)
		if !reflect.DeepEqual(after, before[c.name]) {
			t.Errorf("%s: %s took it over as\n  %+v\n%s left\n  %+v", c.name, then.name, after, first.name, before[c.name])
		}
	}
}

// takeover is what a CR's takeover by a new rudder must keep.
type takeover struct {
	Generation, ObservedGeneration int64
	// Conditions as "type=status/reason", sorted.
	Conditions []string
	Release    map[string]any
	// History as "revision:status".
	History []string
}

func takeoverOf(t *testing.T, gvk schema.GroupVersionKind, ns, name string) takeover {
	t.Helper()
	u, err := crtest.Get(context.Background(), k8s, gvk, ns, name)
	if err != nil {
		t.Fatal(err)
	}
	var tk takeover
	tk.Generation = u.GetGeneration()
	tk.ObservedGeneration, _, _ = unstructured.NestedInt64(u.Object, "status", "observedGeneration")
	tk.Release, _, _ = unstructured.NestedMap(u.Object, "status", "release")
	for _, c := range rstatus.ConditionsOf(u) {
		tk.Conditions = append(tk.Conditions, fmt.Sprintf("%s=%s/%s", c.Type, c.Status, c.Reason))
	}
	slices.Sort(tk.Conditions)
	for _, r := range helmtest.History(t, cluster.Kubeconfig, ns, name) {
		tk.History = append(tk.History, fmt.Sprintf("%d:%s", r.Version, r.Info.Status))
	}
	return tk
}

// passesOf reads a rudder's metrics: which CRs of ns its passes ended on (the state gauge's
// series), and how many passes it made.
func passesOf(addr, ns string) (map[string]bool, float64, error) {
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		return nil, 0, err
	}
	defer resp.Body.Close()
	seen, passes := map[string]bool{}, 0.0
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "rudder_release_state{") && strings.Contains(line, `namespace="`+ns+`"`) && strings.HasSuffix(line, " 1"):
			_, rest, _ := strings.Cut(line, `name="`)
			name, _, _ := strings.Cut(rest, `"`)
			seen[name] = true
		case strings.HasPrefix(line, "rudder_reconcile_pass_seconds_count"):
			f := strings.Fields(line)
			v, _ := strconv.ParseFloat(f[len(f)-1], 64)
			passes += v
		}
	}
	return seen, passes, sc.Err()
}

// previousRudder is the rudder of the commit hack/previous-version names, built once for the
// suite from a worktree of this repository. A clone without that commit (a shallow one) cannot
// run the tests that need it.
func previousRudder(t *testing.T) string {
	t.Helper()
	previous.once.Do(func() { previous.bin, previous.skip, previous.err = buildPrevious() })
	switch {
	case previous.skip != "":
		t.Skip(previous.skip)
	case previous.err != nil:
		t.Fatal(previous.err)
	}
	return previous.bin
}

// previous is the suite's build of the previous version.
var previous struct {
	once      sync.Once
	bin, skip string
	err       error
}

// buildPrevious builds the previous version into the suite's directory; skip says why it
// cannot be built in this clone.
func buildPrevious() (bin, skip string, err error) {
	raw, err := os.ReadFile(filepath.Join(root, "hack", "previous-version"))
	if err != nil {
		return "", "", err
	}
	commit := ""
	for _, line := range strings.Split(string(raw), "\n") {
		if line = strings.TrimSpace(line); line != "" && !strings.HasPrefix(line, "#") {
			commit = line
			break
		}
	}
	if out, err := exec.Command("git", "-C", root, "cat-file", "-e", commit+"^{commit}").CombinedOutput(); err != nil {
		return "", fmt.Sprintf("the previous version %s is not in this clone (a shallow one?): %v %s", commit, err, out), nil
	}
	dir := filepath.Join(suiteDir, "previous")
	tree := filepath.Join(dir, "src")
	if out, err := exec.Command("git", "-C", root, "worktree", "add", "--detach", tree, commit).CombinedOutput(); err != nil {
		return "", "", fmt.Errorf("git worktree add %s: %w\n%s", commit, err, out)
	}
	defer func() { _ = exec.Command("git", "-C", root, "worktree", "remove", "--force", tree).Run() }()
	bin, err = crtest.BuildRudder(tree, dir)
	return bin, "", err
}
