package helm

import (
	"encoding/json"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func TestCarriedLabels(t *testing.T) {
	keys := []string{"rudder.dev/shard", "team"}
	want := map[string]string{"rudder.dev/shard": "b"}
	b, err := json.Marshal(CarriedPatch(keys, want))
	if err != nil {
		t.Fatal(err)
	}
	if got := string(b); got != `{"metadata":{"labels":{"rudder.dev/shard":"b","team":null}}}` {
		t.Errorf("patch %s", got)
	}
	if !CarriedMatch(keys, want, map[string]string{"rudder.dev/shard": "b", "other": "x"}) {
		t.Error("a match with other labels beside")
	}
	if CarriedMatch(keys, want, map[string]string{"rudder.dev/shard": "b", "team": "x"}) ||
		CarriedMatch(keys, want, map[string]string{"rudder.dev/shard": "a"}) || CarriedMatch(keys, want, nil) {
		t.Error("a mismatch taken for a match")
	}

	same := &unstructured.Unstructured{}
	same.SetLabels(map[string]string{"rudder.dev/shard": "b", "app": "x"})
	old := &unstructured.Unstructured{}
	old.SetLabels(map[string]string{"rudder.dev/shard": "a", "team": "t", "app": "x"})
	out := WithCarried([]*unstructured.Unstructured{same, old}, keys, want)
	if out[0] != same {
		t.Error("an object already right was copied")
	}
	if l := out[1].GetLabels(); len(l) != 2 || l["rudder.dev/shard"] != "b" || l["app"] != "x" {
		t.Errorf("relabelled: %v", l)
	}
	if old.GetLabels()["rudder.dev/shard"] != "a" {
		t.Error("the stored manifest's object was modified")
	}
}
