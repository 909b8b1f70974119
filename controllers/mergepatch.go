package controllers

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
		case !reflect.DeepEqual(a, b):
			patch[k] = a
		}
	}
	return patch
}
