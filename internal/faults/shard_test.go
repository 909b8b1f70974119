package faults_test

import (
	"bufio"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rudder-operator/rudder/internal/crtest"
	"github.com/rudder-operator/rudder/internal/helm/helmtest"
)

// Sharding: two rudder processes, each with its own --watch-label-selector and leader election
// (the Lease name is derived from the selector), split the CRs between them.

const shardLabel = "rudder.dev/shard"

// shards starts shard "a" (CRs labelled rudder.dev/shard=a) and shard "rest" (every other CR).
func shards(t *testing.T, ns string) (a, rest *replica) {
	t.Helper()
	elect := []string{"--leader-elect", "--leader-election-namespace", ns}
	a = start(t, "shard-a", append(elect, "--watch-label-selector", shardLabel+"=a")...)
	rest = start(t, "shard-rest", append(elect, "--watch-label-selector", shardLabel+"!=a")...)
	return a, rest
}

// createWeb creates a Web, with the shard label unless shard is "".
func createWeb(t *testing.T, ns, name, shard string, replicas int64) {
	t.Helper()
	u := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"replicas": replicas}}}
	u.SetGroupVersionKind(webGVK)
	u.SetNamespace(ns)
	u.SetName(name)
	if shard != "" {
		u.SetLabels(map[string]string{shardLabel: shard})
	}
	if err := k8s.Create(context.Background(), u); err != nil {
		t.Fatal(err)
	}
}

// logged reports whether a replica's log has a line naming the Web name with every one of
// contains.
func logged(r *replica, name string, contains ...string) bool {
	sc := bufio.NewScanner(strings.NewReader(r.logs()))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
lines:
	for sc.Scan() {
		l := sc.Text()
		if !strings.Contains(l, `"Web":{"name":"`+name+`"`) {
			continue
		}
		for _, c := range contains {
			if !strings.Contains(l, c) {
				continue lines
			}
		}
		return true
	}
	return false
}

// recordLabels are the labels of a release's revision record.
func recordLabels(t *testing.T, ns, name string, revision int) map[string]string {
	t.Helper()
	var s corev1.Secret
	key := client.ObjectKey{Namespace: ns, Name: fmt.Sprintf("sh.helm.release.v1.%s.v%d", name, revision)}
	if err := k8s.Get(context.Background(), key, &s); err != nil {
		t.Fatal(err)
	}
	return s.Labels
}

func TestShardsSplitTheCRs(t *testing.T) {
	ns := crtest.NewNamespace(t, k8s, "shards-")
	a, rest := shards(t, ns)
	var inA, inRest []string
	for i := range 40 {
		name := fmt.Sprintf("s%02d", i)
		if i%2 == 0 {
			createWeb(t, ns, name, "a", 1)
			inA = append(inA, name)
		} else {
			createWeb(t, ns, name, "", 1)
			inRest = append(inRest, name)
		}
	}
	converged(t, ns, append(append([]string{}, inA...), inRest...), 1)
	for _, names := range []struct {
		made, other *replica
		names       []string
	}{{a, rest, inA}, {rest, a, inRest}} {
		for _, n := range names.names {
			if !logged(names.made, n, "installed revision 1") || logged(names.other, n, "installed revision") {
				t.Errorf("%s: not installed by exactly the shard that selects it", n)
			}
		}
	}
	if !leads(a) || !leads(rest) {
		t.Errorf("each shard should lead its own election: a %v, rest %v", leads(a), leads(rest))
	}
	// The label is carried to the release records and the operands, which the shard's caches
	// select on.
	if l := recordLabels(t, ns, "s00", 1); l[shardLabel] != "a" {
		t.Errorf("release record of s00: labels %v", l)
	}
	var dep appsv1.Deployment
	if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "s00"}, &dep); err != nil || dep.Labels[shardLabel] != "a" {
		t.Errorf("operand of s00: %v, labels %v", err, dep.Labels)
	}
}

// A CR relabelled from one shard to the other is adopted in place: its release keeps its one
// revision and its objects, and the new shard serves it from then on.
func TestRelabelMovesTheCR(t *testing.T) {
	ctx := context.Background()
	ns := crtest.NewNamespace(t, k8s, "shards-")
	a, rest := shards(t, ns)
	createWeb(t, ns, "m", "a", 1)
	converged(t, ns, []string{"m"}, 1)
	var before appsv1.Deployment
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "m"}, &before); err != nil {
		t.Fatal(err)
	}

	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(webGVK)
	u.SetNamespace(ns)
	u.SetName("m")
	unlabel := fmt.Sprintf(`{"metadata":{"labels":{%q:null}}}`, shardLabel)
	if err := k8s.Patch(ctx, u, client.RawPatch(types.MergePatchType, []byte(unlabel))); err != nil {
		t.Fatal(err)
	}
	crtest.WaitEvent(t, k8s, ns, "m", "Adopted", "no new revision")
	crtest.Eventually(t, "the record and the objects relabelled", time.Minute, func(ctx context.Context) (bool, error) {
		var dep appsv1.Deployment
		if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "m"}, &dep); err != nil {
			return false, err
		}
		_, onRecord := recordLabels(t, ns, "m", 1)[shardLabel]
		_, onDep := dep.Labels[shardLabel]
		return !onRecord && !onDep, nil
	})
	converged(t, ns, []string{"m"}, 1) // still one deployed revision, the first
	var after appsv1.Deployment
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "m"}, &after); err != nil || after.UID != before.UID {
		t.Fatalf("the operand was replaced: %v (uid %s → %s)", err, before.UID, after.UID)
	}
	if logged(a, "m", `"action":"Uninstall"`) || logged(rest, "m", `"action":"Uninstall"`) {
		t.Fatal("moving the CR uninstalled its release")
	}

	// The new shard serves it: a spec change is its upgrade.
	setReplicas(t, ns, []string{"m"}, 2)
	converged(t, ns, []string{"m"}, 2)
	if !logged(rest, "m", "upgraded to revision 2") || logged(a, "m", "upgraded") {
		t.Fatal("the upgrade after the move was not made by the new shard alone")
	}
}

// While a shard is down, its CRs wait for it: the other shard does not touch them.
func TestStoppedShardIsLeftAlone(t *testing.T) {
	ns := crtest.NewNamespace(t, k8s, "shards-")
	a, rest := shards(t, ns)
	createWeb(t, ns, "x", "a", 1)
	converged(t, ns, []string{"x"}, 1)
	a.kill()

	setReplicas(t, ns, []string{"x"}, 2)
	createWeb(t, ns, "y", "a", 1)
	// The other shard is alive and serving: a CR of its own created after the changes converges.
	createWeb(t, ns, "z", "", 1)
	converged(t, ns, []string{"z"}, 1)

	if logged(rest, "x") || logged(rest, "y") {
		t.Fatal("the running shard acted on the stopped shard's CRs")
	}
	if h := helmtest.History(t, cluster.Kubeconfig, ns, "y"); len(h) != 0 {
		t.Fatalf("y has revisions while its shard is down: %d", len(h))
	}
	if h := helmtest.History(t, cluster.Kubeconfig, ns, "x"); len(h) != 1 {
		t.Fatalf("x has %d revisions while its shard is down, want 1", len(h))
	}
	u := crtest.MustGet(t, k8s, webGVK, ns, "y")
	if c := crtest.Condition(u, "Ready"); c != nil {
		t.Fatalf("y has a Ready condition while its shard is down: %+v", c)
	}
}
