package watches

import (
	"reflect"
	"slices"
	"strings"
	"testing"
)

// jsonKeys are the keys a struct's exported fields take in watches.yaml.
func jsonKeys(t reflect.Type) []string {
	var keys []string
	for f := range t.Fields() {
		if !f.IsExported() {
			continue
		}
		key, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if key == "" || key == "-" {
			continue
		}
		keys = append(keys, key)
	}
	return keys
}

// TestFieldsDeclareTheWatch: every key of Watch and of Limits is declared once in Fields and
// LimitFields, and the tables declare nothing the structs do not hold.
func TestFieldsDeclareTheWatch(t *testing.T) {
	for _, c := range []struct {
		typ      reflect.Type
		declared []string
	}{
		{reflect.TypeFor[Watch](), keysOf(Fields, func(f Field) string { return f.Key })},
		{reflect.TypeFor[Limits](), keysOf(LimitFields, func(f LimitField) string { return f.Key })},
	} {
		held := jsonKeys(c.typ)
		for _, k := range held {
			if n := count(c.declared, k); n != 1 {
				t.Errorf("%s.%s is declared %d times in its table (fields.go), want once", c.typ.Name(), k, n)
			}
		}
		for _, k := range c.declared {
			if !slices.Contains(held, k) {
				t.Errorf("%s's table declares %q, which the struct does not hold", c.typ.Name(), k)
			}
		}
	}
	for _, f := range Fields {
		if f.Doc == "" {
			t.Errorf("field %s has no docs line", f.Key)
		}
	}
	for _, f := range LimitFields {
		if f.Doc == "" || f.Default == "" || f.check == nil {
			t.Errorf("limit %s lacks its docs line, default or check", f.Key)
		}
	}
}

func keysOf[T any](xs []T, key func(T) string) []string {
	out := make([]string, len(xs))
	for i, x := range xs {
		out[i] = key(x)
	}
	return out
}

func count(xs []string, x string) int {
	n := 0
	for _, y := range xs {
		if y == x {
			n++
		}
	}
	return n
}

// TestLimitDefaults: the defaults the reference shows are spelled as watches.yaml takes them.
func TestLimitDefaults(t *testing.T) {
	want := map[string]string{"maxObjects": "1000", "maxManifestBytes": "4Mi", "renderTimeout": "30s", "renderMemory": "256Mi",
		"maxLookups": "100", "actionTimeout": "5m (Helm's `--timeout`)"}
	for _, f := range LimitFields {
		if w, ok := want[f.Key]; ok && f.Default != w {
			t.Errorf("limits.%s default %q, want %q", f.Key, f.Default, w)
		}
	}
}
