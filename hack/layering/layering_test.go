package main

import (
	"reflect"
	"testing"
)

// maxMethods bounds the methods of each type of the module, promoted ones included: a pass is
// steps that take what they need as arguments, not one value every step embeds, and a boundary
// is small interfaces by what their callers need (docs/development.md, "Code style").
const maxMethods = 15

const module = "github.com/rudder-operator/rudder"

// TestTypesAreSmall: no type of the module (tests and generated code aside) has more than
// maxMethods methods.
func TestTypesAreSmall(t *testing.T) {
	pkgs, err := load(module + "/...")
	if err != nil {
		t.Fatal(err)
	}
	read := 0
	for _, pk := range pkgs {
		for _, ty := range pk.types(module) {
			read++
			if ty.methods > maxMethods {
				t.Errorf("type %s.%s has %d methods (%d its own), more than %d",
					pk.p.Types.Name(), ty.name, ty.methods, ty.own, maxMethods)
			}
		}
	}
	if read < 200 {
		t.Fatalf("%d types read in %d packages: the module was not read", read, len(pkgs))
	}
}

func TestFloors(t *testing.T) {
	for _, tc := range []struct {
		name string
		refs [][2]string
		want map[string]int
	}{
		{"none", nil, map[string]int{}},
		{"a chain", [][2]string{{"a", "b"}, {"b", "c"}, {"a", "c"}}, map[string]int{"a": 3, "b": 2, "c": 1}},
		{"a circle shares a floor", [][2]string{{"a", "b"}, {"b", "a"}, {"b", "c"}, {"d", "a"}},
			map[string]int{"a": 2, "b": 2, "c": 1, "d": 3}},
	} {
		var refs []ref
		for _, r := range tc.refs {
			refs = append(refs, ref{from: r[0], to: r[1]})
		}
		if got := floors(refs); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
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
