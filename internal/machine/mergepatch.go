package machine

import "reflect"

// mergePatch is the JSON merge patch (RFC 7386) that turns before into after, both JSON
// objects as unstructured holds them: what controller-runtime's MergeFrom sends, computed from
// the maps instead of from both objects marshalled to JSON and parsed back. A key after lacks
// is null; a value that differs (a list, a scalar, or an object that is no longer one) is
// after's; an object in both is the patch between them, left out when empty. A value that
// marshals alike but is held as another type (int64 and float64) is sent again, harmlessly.
func mergePatch(before, after map[string]any) map[string]any {
	patch := map[string]any{}
	for k := range before {
		if _, ok := after[k]; !ok {
			patch[k] = nil
		}
	}
	for k, a := range after {
		b, ok := before[k]
		if !ok {
			patch[k] = a
			continue
		}
		am, aok := a.(map[string]any)
		bm, bok := b.(map[string]any)
		switch {
		case aok && bok:
			if sub := mergePatch(bm, am); len(sub) > 0 {
				patch[k] = sub
			}
		case !jsonEqual(a, b):
			patch[k] = a
		}
	}
	return patch
}

// jsonEqual reports whether a and b, values as unstructured holds them (maps, lists, strings,
// int64, float64, bool, nil), are equal, without reflect.DeepEqual's allocations for every
// map and list it visits: most passes compare a status with itself. A value of another type
// (a hook may set any) is compared by reflect.DeepEqual.
func jsonEqual(a, b any) bool {
	switch a := a.(type) {
	case map[string]any:
		b, ok := b.(map[string]any)
		if !ok || len(a) != len(b) || (a == nil) != (b == nil) {
			return false
		}
		for k, av := range a {
			bv, ok := b[k]
			if !ok || !jsonEqual(av, bv) {
				return false
			}
		}
		return true
	case []any:
		b, ok := b.([]any)
		if !ok || len(a) != len(b) || (a == nil) != (b == nil) {
			return false
		}
		for i := range a {
			if !jsonEqual(a[i], b[i]) {
				return false
			}
		}
		return true
	case string:
		b, ok := b.(string)
		return ok && a == b
	case int64:
		b, ok := b.(int64)
		return ok && a == b
	case bool:
		b, ok := b.(bool)
		return ok && a == b
	case nil:
		return b == nil
	default:
		return reflect.DeepEqual(a, b)
	}
}
