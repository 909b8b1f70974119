// Command layering prints how the files of each package named build on each other, and the
// size of its types:
//
//   - every reference from one file to a package-level name another file of the package
//     defines, the floors they stand on (a file stands above every file it references; the files
//     of a circle share a floor) and the references that stay on one floor, inside a circle;
//
//   - with -types N, the N types with the most methods: those a value of the type can call
//     (its method set, promoted methods of embedded types included) and its own.
//
//     go run ./hack/layering -types 5 ./internal/machine
//
// layering_test.go holds internal/machine to types of at most maxMethods methods.
package main

import (
	"flag"
	"fmt"
	"os"
	"strings"
)

func main() {
	top := flag.Int("types", 0, "print the `N` types with the most methods")
	flag.Parse()
	if flag.NArg() == 0 {
		fmt.Fprintln(os.Stderr, "usage: layering [-types N] PACKAGE...")
		os.Exit(2)
	}
	pkgs, err := load(flag.Args()...)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	for _, p := range pkgs {
		refs := p.refs()
		floor := floors(refs)
		n, inCircles := 0, 0
		for _, f := range floor {
			n = max(n, f)
		}
		for _, r := range refs {
			if floor[r.from] == floor[r.to] {
				inCircles++
			}
		}
		fmt.Printf("%s: %d files on %d floors, %d references between them, %d of them inside circles\n",
			p.path, p.files, n, len(refs), inCircles)
		for _, r := range refs {
			fmt.Printf("  %s (floor %d) -> %s (floor %d): %s\n", r.from, floor[r.from], r.to, floor[r.to], strings.Join(r.names, " "))
		}
		for _, c := range circles(refs) {
			fmt.Printf("  circle: %s\n", strings.Join(c, " "))
		}
		ts := p.types("github.com/rudder-operator/rudder")
		for i := 0; i < *top && i < len(ts); i++ {
			fmt.Printf("  type %s: %d methods, %d its own\n", ts[i].name, ts[i].methods, ts[i].own)
		}
	}
}
