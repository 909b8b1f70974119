package machine

import (
	"encoding/json"
	"reflect"
	"testing"

	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	"k8s.io/apimachinery/pkg/runtime"
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

// jsonEqual says what reflect.DeepEqual says of the values unstructured holds, and of the
// others a hook may set.
func TestJSONEqualIsDeepEqual(t *testing.T) {
	t.Parallel()
	values := []any{
		nil, "a", "b", int64(1), int64(2), float64(1), int32(1), true, false,
		map[string]any(nil), map[string]any{}, map[string]any{"a": int64(1)}, map[string]any{"a": int64(2)},
		map[string]any{"b": int64(1)}, map[string]any{"a": int64(1), "b": nil}, map[string]any{"a": float64(1)},
		[]any(nil), []any{}, []any{"a"}, []any{"a", "b"}, []any{"b", "a"}, []any{map[string]any{"a": []any{int64(1)}}},
		[]any{map[string]any{"a": []any{int64(2)}}}, map[string]string{"a": "b"}, []string{"a"},
	}
	for _, a := range values {
		for _, b := range values {
			if got, want := jsonEqual(a, b), reflect.DeepEqual(a, b); got != want {
				t.Errorf("jsonEqual(%#v, %#v) = %v, reflect.DeepEqual says %v", a, b, got, want)
			}
		}
		// A copy is equal, not only the value itself.
		if c := runtime.DeepCopyJSONValue(deepCopyable(a)); !jsonEqual(deepCopyable(a), c) {
			t.Errorf("jsonEqual(%#v, its copy) = false", a)
		}
	}
}

// deepCopyable is v if runtime.DeepCopyJSONValue copies it, else nil.
func deepCopyable(v any) any {
	switch v.(type) {
	case map[string]string, []string, int32:
		return nil
	}
	return v
}
