package intern

import (
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
