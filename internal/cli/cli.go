package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/rudder-operator/rudder/internal/hook"
)

// Env is what a subcommand runs with.
type Env struct {
	Stdout, Stderr io.Writer
	// Hooks are the Go hooks of the kinds rudder knows (main passes the built-in kinds'):
	// template and lint run their PreRelease hooks as the reconciler does. nil: none.
	Hooks *hook.Registry
}

// Commands are the subcommands Run knows, besides "run" (the manager, which main runs).
var Commands = map[string]struct {
	Summary string
	Run     func(ctx context.Context, args []string, env Env) error
}{
	"scaffold": {"write a CRD, RBAC, a watches.yaml entry and a sample CR for a chart", Scaffold},
	"template": {"print what rudder would apply for each CR, without a cluster", Template},
	"lint":     {"check watches.yaml, every chart (helm lint --strict) and CR files", Lint},
	"diff":     {"show what a chart edit would change for each CR, before it is live", Diff},
}

// Known lists every subcommand, for messages.
func Known() string {
	names := []string{"run"}
	for n := range Commands {
		names = append(names, n)
	}
	sort.Strings(names)
	return strings.Join(names, ", ")
}

// errUsage is returned after a usage message was printed.
var errUsage = errors.New("usage")

// exitError ends a subcommand with an exit code of its own, printing err when there is one:
// diff's 1 for "something changes" (errDiffers) and 2 for trouble, as diff(1) has them.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string {
	if e.err == nil {
		return fmt.Sprintf("exit %d", e.code)
	}
	return e.err.Error()
}

func (e *exitError) Unwrap() error { return e.err }

// errDiffers: diff found changes (exit 1, nothing more to say).
var errDiffers = &exitError{code: 1}

// trouble is err as diff(1)'s trouble: exit 2.
func trouble(err error) error { return &exitError{code: 2, err: err} }

// Run runs one subcommand and returns the process's exit code: 0, 1 for what it found wrong
// (printed to stderr), 2 for a usage error.
func Run(ctx context.Context, args []string, env Env) int {
	if env.Hooks == nil {
		env.Hooks = hook.NewRegistry()
	}
	stdout, stderr := env.Stdout, env.Stderr
	if len(args) == 0 {
		fmt.Fprintf(stderr, "rudder: a subcommand is required; known: %s\n", Known())
		return 2
	}
	if args[0] == "help" || args[0] == "-h" || args[0] == "--help" {
		usage(stdout)
		return 0
	}
	cmd, ok := Commands[args[0]]
	if !ok {
		fmt.Fprintf(stderr, "rudder: unknown subcommand %q; known: %s\n", args[0], Known())
		return 2
	}
	err := cmd.Run(ctx, args[1:], env)
	var ee *exitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ee):
		if ee.err != nil {
			fmt.Fprintf(stderr, "rudder %s: %v\n", args[0], ee.err)
		}
		return ee.code
	case errors.Is(err, errUsage), errors.Is(err, flag.ErrHelp):
		return 2
	default:
		fmt.Fprintf(stderr, "rudder %s: %v\n", args[0], err)
		return 1
	}
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "Usage: rudder [run] [manager flags]   the operator (the default)")
	names := make([]string, 0, len(Commands))
	for n := range Commands {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "       rudder %-9s %s\n", n, Commands[n].Summary)
	}
	fmt.Fprintln(w, "`rudder <subcommand> -h` lists a subcommand's flags.")
}

// newFlags is a flag set that prints its usage to stderr and returns errors.
func newFlags(name, args string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("rudder "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: rudder %s %s\n", name, args)
		fs.PrintDefaults()
	}
	return fs
}

// parse parses flags, reporting a usage error as errUsage.
func parse(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return errUsage
	}
	return nil
}
