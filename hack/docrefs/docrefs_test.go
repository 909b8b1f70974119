// Package docrefs holds the guide (docs/development.md) and every package's doc.go to the
// code they describe: each file they name exists, and each name they qualify with one of
// rudder's packages (machine.Run, *helm.Client, controllers.Reconciler.Reconcile) is declared
// in it, in the file they say where they say one. `make lint` runs it.
package docrefs

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

const root = "../.."

// decls is what one package declares: each name (a type's method or field as Type.Name) and
// the file, relative to root, that declares it.
type decls map[string]string

var (
	// fileRef is a file name as the docs write one.
	fileRef = regexp.MustCompile(`(?:[\w.-]+/)*[\w-]+\.(?:go|md|yml|yaml|sh|svg)\b`)
	// dirRef is a directory of the repository as the guide quotes one: `internal/helm`.
	dirRef = regexp.MustCompile("`((?:internal|controllers|api|config|hack|docs|charts)(?:/[\\w.-]+)*)/?`")
	// qualified is pkg.Name or pkg.Type.Name; pkg is checked against rudder's packages.
	qualified = regexp.MustCompile(`\b([a-z][a-z0-9]*)\.([A-Z]\w*)(?:\.([A-Z]\w*))?`)
)

func TestDocsNameWhatExists(t *testing.T) {
	dirs := walkDirs(t)
	pkgs := packagesOf(t, dirs)
	if len(pkgs["machine"]) == 0 || len(pkgs["helm"]) == 0 {
		t.Fatalf("read %d packages, without machine or helm: the test no longer finds the code", len(pkgs))
	}
	docs := map[string]string{} // path relative to root → the text the check reads
	raw, err := os.ReadFile(filepath.Join(root, "docs", "development.md"))
	if err != nil {
		t.Fatal(err)
	}
	docs["docs/development.md"] = string(raw)
	for _, dir := range dirs {
		path := filepath.Join(dir, "doc.go")
		f, err := parser.ParseFile(token.NewFileSet(), filepath.Join(root, path), nil, parser.ParseComments|parser.PackageClauseOnly)
		if err != nil {
			continue
		}
		var text strings.Builder
		for _, c := range f.Comments {
			text.WriteString(c.Text())
		}
		docs[path] = text.String()
	}
	for path, text := range docs {
		// The guide names a package's file by its bare name after the package (`fields.go`
		// in internal/watches' row); a doc.go names its own package's files so, and another's
		// with the path.
		var anywhere []string
		if path == "docs/development.md" {
			anywhere = dirs
		}
		for _, problem := range check(text, filepath.Dir(path), anywhere, pkgs) {
			t.Errorf("%s: %s", path, problem)
		}
	}
}

// check is what text, written in dir, names that does not exist. A bare file name is looked
// for in dir, and in each of the directories anywhere.
func check(text, dir string, anywhere []string, pkgs map[string]decls) []string {
	var problems []string
	for _, m := range fileRef.FindAllStringIndex(text, -1) {
		name := text[m[0]:m[1]]
		if m[0] > 0 && strings.ContainsRune("$.", rune(text[m[0]-1])) {
			continue // ${VAR}.yaml, x.y.go: not a file's name
		}
		if m[1] < len(text) && text[m[1]] == '/' {
			continue // helm.sh/helm/v4: a module's path
		}
		bare := !strings.Contains(name, "/")
		if !fileExists(name, dir) && (!bare || !inSomeDir(anywhere, name)) {
			problems = append(problems, "names the file "+name+", which does not exist")
		}
	}
	for _, m := range dirRef.FindAllStringSubmatch(text, -1) {
		if _, err := os.Stat(filepath.Join(root, m[1])); err != nil {
			problems = append(problems, "names the directory "+m[1]+", which does not exist")
		}
	}
	for _, m := range qualified.FindAllStringSubmatchIndex(text, -1) {
		pkg, name := text[m[2]:m[3]], text[m[4]:m[5]]
		d, ours := pkgs[pkg]
		if !ours || strings.HasSuffix(text[:m[0]], "/") {
			continue // another module's package, or a path's directory
		}
		if m[6] >= 0 {
			name += "." + text[m[6]:m[7]]
		}
		file, ok := d[name]
		if !ok {
			problems = append(problems, "names "+pkg+"."+name+", which package "+pkg+" does not declare")
			continue
		}
		// "pkg.Name (`internal/pkg/file.go`)" or "pkg.Name in file.go": the file it says.
		after := text[m[1]:min(len(text), m[1]+80)]
		if f := fileRef.FindStringIndex(after); f != nil && strings.Trim(after[:f[0]], " \t\n(`in") == "" {
			said := after[f[0]:f[1]]
			if !strings.HasSuffix(file, "/"+said) && file != said {
				problems = append(problems, "places "+pkg+"."+name+" in "+said+"; it is declared in "+file)
			}
		}
	}
	return problems
}

// fileExists reports whether name is a file relative to dir, to the repository, to internal/,
// or (a bare name) in dir's package.
func fileExists(name, dir string) bool {
	for _, base := range []string{dir, ".", "internal"} {
		if _, err := os.Stat(filepath.Join(root, base, name)); err == nil {
			return true
		}
	}
	return false
}

// inSomeDir reports whether one of dirs holds a file of that name.
func inSomeDir(dirs []string, name string) bool {
	for _, dir := range dirs {
		if _, err := os.Stat(filepath.Join(root, dir, name)); err == nil {
			return true
		}
	}
	return false
}

// walkDirs is every directory of the repository that holds Go code, relative to root.
func walkDirs(t *testing.T) []string {
	var dirs []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			switch d.Name() {
			case "testdata", "bin", ".git", "node_modules":
				return filepath.SkipDir
			}
			rel, _ := filepath.Rel(root, path)
			if matches, _ := filepath.Glob(filepath.Join(path, "*.go")); len(matches) > 0 {
				dirs = append(dirs, rel)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return dirs
}

// packagesOf is the declarations of each of rudder's packages in dirs by package name (tests left
// out; two packages of one name share an entry).
func packagesOf(t *testing.T, dirs []string) map[string]decls {
	pkgs := map[string]decls{}
	fset := token.NewFileSet()
	for _, dir := range dirs {
		matches, _ := filepath.Glob(filepath.Join(root, dir, "*.go"))
		for _, path := range matches {
			if strings.HasSuffix(path, "_test.go") {
				continue
			}
			f, err := parser.ParseFile(fset, path, nil, 0)
			if err != nil {
				t.Fatal(err)
			}
			name := f.Name.Name
			if name == "main" {
				name = filepath.Base(dir)
			}
			if pkgs[name] == nil {
				pkgs[name] = decls{}
			}
			rel, _ := filepath.Rel(root, path)
			for _, n := range declared(f) {
				pkgs[name][n] = rel
			}
		}
	}
	return pkgs
}

// declared is the package-level names of f, its methods and struct fields as Type.Name.
func declared(f *ast.File) []string {
	var names []string
	for _, d := range f.Decls {
		switch d := d.(type) {
		case *ast.FuncDecl:
			if d.Recv == nil {
				names = append(names, d.Name.Name)
				continue
			}
			typ := d.Recv.List[0].Type
			if s, ok := typ.(*ast.StarExpr); ok {
				typ = s.X
			}
			if g, ok := typ.(*ast.IndexExpr); ok {
				typ = g.X
			}
			if id, ok := typ.(*ast.Ident); ok {
				names = append(names, id.Name+"."+d.Name.Name)
			}
		case *ast.GenDecl:
			for _, spec := range d.Specs {
				switch s := spec.(type) {
				case *ast.TypeSpec:
					names = append(names, s.Name.Name)
					names = append(names, members(s)...)
				case *ast.ValueSpec:
					for _, id := range s.Names {
						names = append(names, id.Name)
					}
				}
			}
		}
	}
	return names
}

// members is a struct's fields and an interface's methods, as Type.Name.
func members(s *ast.TypeSpec) []string {
	var list *ast.FieldList
	switch t := s.Type.(type) {
	case *ast.StructType:
		list = t.Fields
	case *ast.InterfaceType:
		list = t.Methods
	default:
		return nil
	}
	var names []string
	for _, field := range list.List {
		for _, id := range field.Names {
			names = append(names, s.Name.Name+"."+id.Name)
		}
		if len(field.Names) == 0 { // embedded: its name is its type's
			typ := field.Type
			if st, ok := typ.(*ast.StarExpr); ok {
				typ = st.X
			}
			switch e := typ.(type) {
			case *ast.Ident:
				names = append(names, s.Name.Name+"."+e.Name)
			case *ast.SelectorExpr:
				names = append(names, s.Name.Name+"."+e.Sel.Name)
			}
		}
	}
	return names
}
