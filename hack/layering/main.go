// Command layering prints how the files of each package named build on each other: every
// reference from one file to a package-level name another file of the package defines, and
// the files that reference each other in a circle. Inside a package, files build on each
// other one way (docs/development.md, "Code style"); layering_test.go holds the repository to
// that.
//
//	go run ./hack/layering ./internal/machine ./controllers
package main

import (
	"fmt"
	"os"
	"strings"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: layering PACKAGE...")
		os.Exit(2)
	}
	pkgs, err := load(os.Args[1:]...)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	for _, p := range pkgs {
		refs := p.refs()
		fmt.Printf("%s: %d files, %d references between them\n", p.path, p.files, len(refs))
		for _, r := range refs {
			fmt.Printf("  %s -> %s: %s\n", r.from, r.to, strings.Join(r.names, " "))
		}
		for _, c := range circles(refs) {
			fmt.Printf("  circle: %s\n", strings.Join(c, " "))
		}
	}
}
