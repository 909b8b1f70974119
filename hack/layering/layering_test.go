package main

import (
	"reflect"
	"slices"
	"strings"
	"testing"
)

// TestFilesBuildOneWay: in no package of rudder do two files name each other, directly or
// through others.
func TestFilesBuildOneWay(t *testing.T) {
	const module = "github.com/rudder-operator/rudder"
	pkgs, err := load(module + "/...")
	if err != nil {
		t.Fatal(err)
	}
	if len(pkgs) < 20 {
		t.Fatalf("%d packages loaded: the module was not read", len(pkgs))
	}
	known := false // a reference every reading of the module finds: the test can fail
	for _, p := range pkgs {
		refs := p.refs()
		for _, r := range refs {
			known = known || p.path == module+"/internal/machine" && r.from == "run.go" && r.to == "pass.go" && slices.Contains(r.names, "newPass")
		}
		for _, c := range circles(refs) {
			var b strings.Builder
			for _, r := range refs {
				if slices.Contains(c, r.from) && slices.Contains(c, r.to) {
					b.WriteString("\n    " + r.from + " -> " + r.to + ": " + strings.Join(r.names, " "))
				}
			}
			t.Errorf("%s: files %v name each other; the references between them:%s", p.path, c, b.String())
		}
	}
	if !known {
		t.Error("no reference from internal/machine/run.go to newPass (pass.go) was read")
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
