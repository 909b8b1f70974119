package main

import (
	"reflect"
	"slices"
	"strings"
	"testing"
)

// allowed are the circles of files the repository still has: internal/records', whose
// references back up stay at 2 of 21 (the Driver type and its queries; a Head and its facts).
// A change that adds a circle, or a file to this one, fails; one that breaks it up takes it
// off this list.
var allowed = map[string][][]string{
	"internal/records": {{"cache.go", "facts.go", "query.go", "state.go", "storage.go"}},
}

// TestFilesBuildOneWay: in every package of rudder, no two files name each other, directly or
// through others, but for the circles allowed.
func TestFilesBuildOneWay(t *testing.T) {
	const module = "github.com/rudder-operator/rudder"
	pkgs, err := load(module + "/...")
	if err != nil {
		t.Fatal(err)
	}
	if len(pkgs) < 20 {
		t.Fatalf("%d packages loaded: the module was not read", len(pkgs))
	}
	seen := map[string]bool{}
	for _, p := range pkgs {
		rel := strings.TrimPrefix(strings.TrimPrefix(p.path, module), "/")
		refs := p.refs()
		got := circles(refs)
		if want := allowed[rel]; !reflect.DeepEqual(got, want) {
			var b strings.Builder
			for _, c := range got {
				for _, r := range refs {
					if slices.Contains(c, r.from) && slices.Contains(c, r.to) {
						b.WriteString("\n    " + r.from + " -> " + r.to + ": " + strings.Join(r.names, " "))
					}
				}
			}
			t.Errorf("%s: files in circles %v, want %v (allowed); the references inside them:%s", p.path, got, want, b.String())
		}
		seen[rel] = true
	}
	for rel := range allowed {
		if !seen[rel] {
			t.Errorf("allowed lists %s, which is no package of the module", rel)
		}
	}
}

func TestCircles(t *testing.T) {
	for _, tc := range []struct {
		name string
		refs [][2]string
		want [][]string
	}{
		{"none", nil, nil},
		{"one way", [][2]string{{"a", "b"}, {"b", "c"}, {"a", "c"}}, nil},
		{"two files", [][2]string{{"a", "b"}, {"b", "a"}}, [][]string{{"a", "b"}}},
		{"through a third", [][2]string{{"a", "b"}, {"b", "c"}, {"c", "a"}, {"c", "d"}}, [][]string{{"a", "b", "c"}}},
		{"two circles", [][2]string{{"a", "b"}, {"b", "a"}, {"b", "c"}, {"c", "d"}, {"d", "c"}}, [][]string{{"a", "b"}, {"c", "d"}}},
	} {
		var refs []ref
		for _, r := range tc.refs {
			refs = append(refs, ref{from: r[0], to: r[1]})
		}
		if got := circles(refs); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}
