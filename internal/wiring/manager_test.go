package wiring

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
)

// The CR cache does not keep kubectl's copy of the applied CR.
func TestStripCR(t *testing.T) {
	t.Parallel()
	u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "x/v1", "kind": "Web",
		"metadata": map[string]any{"name": "w", "annotations": map[string]any{
			corev1.LastAppliedConfigAnnotation: `{"spec":{}}`, "rudder.dev/paused": "true"}},
		"spec": map[string]any{"replicas": int64(1)}}}
	if _, err := stripCR(u); err != nil {
		t.Fatal(err)
	}
	if ann := u.GetAnnotations(); len(ann) != 1 || ann["rudder.dev/paused"] != "true" || u.Object["spec"] == nil {
		t.Errorf("kept %v", u.Object)
	}
}

// Each shard elects its own leader: the Lease name is derived from the selector.
func TestLeaderElectionIDPerShard(t *testing.T) {
	t.Parallel()
	parse := func(s string) labels.Selector {
		sel, err := labels.Parse(s)
		if err != nil {
			t.Fatal(err)
		}
		return sel
	}
	if got := LeaderElectionID(parse("")); got != "rudder.rudder.dev" {
		t.Errorf("unsharded: %s", got)
	}
	a, rest := LeaderElectionID(parse("rudder.dev/shard=a")), LeaderElectionID(parse("rudder.dev/shard!=a"))
	if a == rest || a == "rudder.rudder.dev" || a != LeaderElectionID(parse(" rudder.dev/shard = a ")) {
		t.Errorf("shard IDs: a %s, rest %s", a, rest)
	}
	if keys := selectorKeys(parse("b=1,a in (x,y),!c,a!=z")); strings.Join(keys, ",") != "a,b,c" {
		t.Errorf("selector keys: %v", keys)
	}
}
