package intern

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"unsafe"
)

// fresh is s in an allocation of its own, as a decoder makes every string it reads.
func fresh(s string) string { return strings.Clone(s) }

func same(a, b string) bool { return unsafe.StringData(a) == unsafe.StringData(b) }

func TestStringsShareOneCopy(t *testing.T) {
	a, b := fresh("rudder.dev/owner-uid"), fresh("rudder.dev/owner-uid")
	if same(a, b) {
		t.Fatal("the test's strings share their bytes before interning")
	}
	if !same(String(a), String(b)) {
		t.Fatal("two equal strings interned do not share their bytes")
	}
	if String("") != "" {
		t.Fatal("the empty string changed")
	}
}

func TestJSONKeepsTheValueAndSharesItsStrings(t *testing.T) {
	obj := func() map[string]any {
		return map[string]any{
			fresh("status"): map[string]any{
				fresh("conditions"): []any{map[string]any{fresh("type"): fresh("Ready"), fresh("status"): fresh("True"), fresh("observedGeneration"): int64(3)}},
				fresh("release"):    map[string]any{fresh("chartDigest"): fresh("sha256:abc"), fresh("revision"): int64(1), fresh("ok"): true, fresh("none"): nil},
			},
		}
	}
	a, b := Object(obj()), Object(obj())
	if want := obj(); !reflect.DeepEqual(a, want) {
		t.Fatalf("interned %v, want %v", a, want)
	}
	ca := a["status"].(map[string]any)["conditions"].([]any)[0].(map[string]any)
	cb := b["status"].(map[string]any)["conditions"].([]any)[0].(map[string]any)
	if !same(ca["type"].(string), cb["type"].(string)) {
		t.Fatal("equal values of two objects do not share their bytes")
	}
	for k := range ca {
		for k2 := range cb {
			if k == k2 && !same(k, k2) {
				t.Fatalf("the key %q of two objects does not share its bytes", k)
			}
		}
	}
	if Object(nil) != nil || Strings(nil) != nil {
		t.Fatal("nil became a map")
	}
}

func TestStringsMapSharesKeysAndValues(t *testing.T) {
	a := Strings(map[string]string{fresh("owner"): fresh("helm")})
	b := Strings(map[string]string{fresh("owner"): fresh("helm")})
	if !same(a["owner"], b["owner"]) {
		t.Fatal("equal label values do not share their bytes")
	}
	for k := range a {
		for k2 := range b {
			if !same(k, k2) {
				t.Fatal("equal label keys do not share their bytes")
			}
		}
	}
}

// converged is a CR as rudder's cache holds it once released and ready.
const converged = `{"apiVersion":"bench.rudder.dev/v1","kind":"Scale","metadata":{"name":"s-0042","namespace":"bench","uid":"6f1c1f8e-5d0c-4a57-9d8e-2b1c8f0e4a11","resourceVersion":"184467","generation":1,"creationTimestamp":"2026-12-03T00:10:28Z","finalizers":["rudder.dev/uninstall"]},
"spec":{"clusterIP":"None"},
"status":{"observedGeneration":1,"conditions":[
{"type":"Released","status":"True","reason":"InstallSucceeded","message":"revision 1 of scale-web 0.1.0","observedGeneration":1,"lastTransitionTime":"2026-12-03T00:10:29Z"},
{"type":"Ready","status":"True","reason":"Current","message":"every object of revision 1 is current","observedGeneration":1,"lastTransitionTime":"2026-12-03T00:10:31Z"},
{"type":"Reconciling","status":"False","reason":"Current","message":"","observedGeneration":1,"lastTransitionTime":"2026-12-03T00:10:31Z"},
{"type":"Stalled","status":"False","reason":"Current","message":"","observedGeneration":1,"lastTransitionTime":"2026-12-03T00:10:29Z"}],
"release":{"name":"s-0042","revision":1,"chart":"scale-web-0.1.0","chartDigest":"9b2d7f6c0a1e4b3f8d5c2a7e6f1b0c9d8e7f6a5b4c3d2e1f0a9b8c7d6e5f4a3b","valuesDigest":"0c1d2e3f4a5b6c7d8e9f0a1b2c3d4e5f6a7b8c9d0e1f2a3b4c5d6e7f8a9b0c1d",
"applied":{"revision":1,"generation":1,"chartDigest":"9b2d7f6c0a1e4b3f8d5c2a7e6f1b0c9d8e7f6a5b4c3d2e1f0a9b8c7d6e5f4a3b"}}}}`

// BenchmarkObject is what interning costs the cache per watch event of a CR.
func BenchmarkObject(b *testing.B) {
	var obj map[string]any
	for b.Loop() {
		b.StopTimer()
		if err := json.Unmarshal([]byte(converged), &obj); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		obj = Object(obj)
	}
}
