// Package intern makes the strings of objects the caches keep canonical, so that the copies
// of a string every cached object carries (the keys of its JSON and of its labels, its
// namespace, the reasons and types of its conditions, a chart's digest in every release of
// it) share one allocation.
//
// The canonical strings are the unique package's: held weakly, so that a string no cached
// object holds any more is collected. A string only one object holds (a CR author's own
// words) costs what it did, one copy, plus the unique package's entry for it, and is freed
// with that object.
package intern

import "unique"

// String is the canonical copy of s.
func String(s string) string {
	if s == "" {
		return s
	}
	return unique.Make(s).Value()
}

// Strings gives the keys and values of m as their canonical copies, in a new map (a map's
// keys cannot be replaced in place); nil stays nil.
func Strings(m map[string]string) map[string]string { return canonicalMap(m, String) }

// JSON gives v, a value of decoded JSON (what unstructured objects hold), with every string in
// it, keys and values, a canonical copy. Maps are made anew; lists are changed in place.
func JSON(v any) any {
	switch x := v.(type) {
	case string:
		return String(x)
	case map[string]any:
		return Object(x)
	case []any:
		for i, e := range x {
			x[i] = JSON(e)
		}
		return x
	default:
		return v
	}
}

// Object is JSON for an object: a new map; nil stays nil.
func Object(m map[string]any) map[string]any { return canonicalMap(m, JSON) }

// canonicalMap is m in a new map, its keys canonical copies and its values value's; nil stays
// nil.
func canonicalMap[V any](m map[string]V, value func(V) V) map[string]V {
	if m == nil {
		return nil
	}
	out := make(map[string]V, len(m))
	for k, v := range m {
		out[String(k)] = value(v)
	}
	return out
}
