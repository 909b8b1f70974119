package main

import (
	"fmt"
	"go/ast"
	"go/types"
	"maps"
	"path/filepath"
	"slices"
	"strings"

	"golang.org/x/tools/go/packages"
)

// pkg is one package as its files name each other.
type pkg struct {
	path  string
	files int
	p     *packages.Package
}

// ref is one file's references to the package-level names (and methods) another file of its
// package defines.
type ref struct {
	from, to string
	names    []string
}

// load type-checks the packages of patterns (their tests left out).
func load(patterns ...string) ([]pkg, error) {
	cfg := &packages.Config{Mode: packages.NeedName | packages.NeedFiles | packages.NeedCompiledGoFiles |
		packages.NeedSyntax | packages.NeedTypes | packages.NeedTypesInfo}
	ps, err := packages.Load(cfg, patterns...)
	if err != nil {
		return nil, err
	}
	var out []pkg
	for _, p := range ps {
		if len(p.Errors) > 0 {
			return nil, fmt.Errorf("%s: %w", p.PkgPath, p.Errors[0])
		}
		out = append(out, pkg{path: p.PkgPath, files: len(p.CompiledGoFiles), p: p})
	}
	return out, nil
}

// refs are the references between the package's files, sorted.
func (pk pkg) refs() []ref {
	p := pk.p
	names := map[[2]string]map[string]bool{}
	for i, f := range p.Syntax {
		from := filepath.Base(p.CompiledGoFiles[i])
		ast.Inspect(f, func(n ast.Node) bool {
			id, ok := n.(*ast.Ident)
			if !ok {
				return true
			}
			obj := p.TypesInfo.Uses[id]
			name, ok := packageLevel(p.Types, obj)
			if !ok {
				return true
			}
			to := filepath.Base(p.Fset.Position(obj.Pos()).Filename)
			if to == from {
				return true
			}
			k := [2]string{from, to}
			if names[k] == nil {
				names[k] = map[string]bool{}
			}
			names[k][name] = true
			return true
		})
	}
	out := make([]ref, 0, len(names))
	for k, ns := range names {
		out = append(out, ref{from: k[0], to: k[1], names: slices.Sorted(maps.Keys(ns))})
	}
	slices.SortFunc(out, func(a, b ref) int { return strings.Compare(a.from+" "+a.to, b.from+" "+b.to) })
	return out
}

// packageLevel names obj when it is defined at the package level of pkg, or is a method of one
// of its types ("Type.method"); fields and local names are not.
func packageLevel(pkg *types.Package, obj types.Object) (string, bool) {
	if obj == nil || obj.Pkg() != pkg {
		return "", false
	}
	switch o := obj.(type) {
	case *types.Func:
		if recv := o.Signature().Recv(); recv != nil {
			t := recv.Type()
			if ptr, ok := t.(*types.Pointer); ok {
				t = ptr.Elem()
			}
			if named, ok := t.(*types.Named); ok {
				return named.Obj().Name() + "." + o.Name(), true
			}
			return "", false
		}
	case *types.Var:
		if o.IsField() {
			return "", false
		}
	}
	return obj.Name(), obj.Parent() == pkg.Scope()
}

// floors is the floor each file of refs stands on: 1 for a file that references no other, else
// one above the highest file it references outside its own circle (the files of a circle
// share a floor).
func floors(refs []ref) map[string]int {
	comp := map[string]int{} // the circle of each file in a circle
	for i, c := range circles(refs) {
		for _, f := range c {
			comp[f] = i + 1
		}
	}
	same := func(a, b string) bool { return a == b || comp[a] != 0 && comp[a] == comp[b] }
	floor := map[string]int{}
	for _, r := range refs {
		floor[r.from], floor[r.to] = 1, 1
	}
	// The graph of circles is acyclic: raising every file above what it references settles
	// within as many rounds as there are files.
	for range len(floor) {
		changed := false
		for _, r := range refs {
			if !same(r.from, r.to) && floor[r.from] <= floor[r.to] {
				floor[r.from], changed = floor[r.to]+1, true
			}
		}
		for _, r := range refs { // a circle stands as high as its highest file
			if same(r.from, r.to) && floor[r.from] != floor[r.to] {
				m := max(floor[r.from], floor[r.to])
				floor[r.from], floor[r.to], changed = m, m, true
			}
		}
		if !changed {
			break
		}
	}
	return floor
}

// typeSize is a named type of a package and how many methods it has.
type typeSize struct {
	name string
	// methods are those a value of it can call (the method set of *T, or an interface's) that
	// the module itself declares: its own and those promoted from the module's types. Methods
	// promoted from other modules' types (metav1.ObjectMeta's, manager.Manager's) are theirs to
	// keep small; own are those declared on it.
	methods, own int
}

// types are the package's named types, interfaces included, the most methods first. module
// is the path prefix of the packages whose methods count.
func (pk pkg) types(module string) []typeSize {
	scope := pk.p.Types.Scope()
	var out []typeSize
	for _, name := range scope.Names() {
		tn, ok := scope.Lookup(name).(*types.TypeName)
		if !ok || tn.IsAlias() {
			continue
		}
		named, ok := tn.Type().(*types.Named)
		if !ok {
			continue
		}
		var set *types.MethodSet
		own := named.NumMethods()
		if iface, ok := named.Underlying().(*types.Interface); ok {
			set, own = types.NewMethodSet(named), iface.NumExplicitMethods()
		} else {
			set = types.NewMethodSet(types.NewPointer(named))
		}
		n := 0
		for sel := range set.Methods() {
			if p := sel.Obj().Pkg(); p != nil && (p.Path() == module || strings.HasPrefix(p.Path(), module+"/")) {
				n++
			}
		}
		out = append(out, typeSize{name: name, methods: n, own: own})
	}
	slices.SortStableFunc(out, func(a, b typeSize) int { return b.methods - a.methods })
	return out
}

// circles are the sets of files (two or more) that reference each other in a circle: the
// strongly connected components of refs (Tarjan's algorithm), each sorted, in order.
func circles(refs []ref) [][]string {
	next := map[string][]string{}
	var files []string
	for _, r := range refs {
		for _, f := range []string{r.from, r.to} {
			if _, ok := next[f]; !ok {
				next[f] = nil
				files = append(files, f)
			}
		}
		next[r.from] = append(next[r.from], r.to)
	}
	slices.Sort(files)
	index, low, on := map[string]int{}, map[string]int{}, map[string]bool{}
	var stack []string
	var out [][]string
	var visit func(f string)
	visit = func(f string) {
		index[f], low[f] = len(index), len(index)
		stack = append(stack, f)
		on[f] = true
		for _, g := range next[f] {
			if _, seen := index[g]; !seen {
				visit(g)
				low[f] = min(low[f], low[g])
			} else if on[g] {
				low[f] = min(low[f], index[g])
			}
		}
		if low[f] != index[f] {
			return
		}
		var c []string
		for {
			g := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			on[g] = false
			c = append(c, g)
			if g == f {
				break
			}
		}
		if len(c) > 1 {
			slices.Sort(c)
			out = append(out, c)
		}
	}
	for _, f := range files {
		if _, seen := index[f]; !seen {
			visit(f)
		}
	}
	slices.SortFunc(out, func(a, b []string) int { return strings.Compare(a[0], b[0]) })
	return out
}
