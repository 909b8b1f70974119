package controllers

import (
	"encoding/json"
	"testing"

	jsonpatch "gopkg.in/evanphx/json-patch.v4"
)

// mergePatch sends what controller-runtime's MergeFrom sends (evanphx/json-patch's
// CreateMergePatch of the two objects' JSON), and applying it to before gives after.
func TestMergePatchIsCreateMergePatch(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ before, after string }{
		{`{}`, `{}`},
		{`{"a":1}`, `{"a":1}`},
		{`{"a":1}`, `{"a":2}`},
		{`{"a":1}`, `{}`},
		{`{}`, `{"a":{"b":[1,2]}}`},
		{`{"a":{"b":1,"c":2}}`, `{"a":{"b":1,"c":3,"d":null}}`},
		{`{"a":{"b":1}}`, `{"a":{"b":1}}`},
		{`{"a":{"b":1}}`, `{"a":[1]}`},
		{`{"a":[1]}`, `{"a":{"b":1}}`},
		{`{"a":null}`, `{"a":{"b":1}}`},
		{`{"a":{"b":{"c":"x"}}}`, `{"a":{"b":{}}}`},
		{`{"conditions":[{"type":"Ready","status":"False"}],"observedGeneration":1}`,
			`{"conditions":[{"type":"Ready","status":"True"}],"observedGeneration":2,"release":{"name":"r","revision":1}}`},
		{`{"conditions":[{"type":"Ready"}],"mirror":{"replicas":3,"x":"y"}}`, `{"conditions":[{"type":"Ready"}],"mirror":{"replicas":3}}`},
	} {
		var before, after map[string]any
		if err := json.Unmarshal([]byte(c.before), &before); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal([]byte(c.after), &after); err != nil {
			t.Fatal(err)
		}
		got, err := json.Marshal(mergePatch(before, after))
		if err != nil {
			t.Fatal(err)
		}
		want, err := jsonpatch.CreateMergePatch([]byte(c.before), []byte(c.after))
		if err != nil {
			t.Fatal(err)
		}
		if !jsonpatch.Equal(got, want) {
			t.Errorf("%s → %s: patch %s, CreateMergePatch %s", c.before, c.after, got, want)
		}
		applied, err := jsonpatch.MergePatch([]byte(c.before), got)
		if err != nil {
			t.Fatal(err)
		}
		if !jsonpatch.Equal(applied, []byte(c.after)) && c.after != `{"a":{"b":1,"c":3,"d":null}}` {
			t.Errorf("%s + %s = %s, want %s", c.before, got, applied, c.after)
		}
	}
}
