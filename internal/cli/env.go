package cli

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/rudder-operator/rudder/internal/hook"
)

// What every command shares: the environment it runs in (Env), and the errors and argument
// checks that give rudder's exit codes and usage messages.

// Env is what a subcommand runs with.
type Env struct {
	Stdout, Stderr io.Writer
	// Hooks are the Go hooks of the kinds rudder knows (main passes the built-in kinds'):
	// template and lint run their PreRelease hooks as the reconciler does. nil: none.
	Hooks *hook.Registry
	// Plugin: the binary runs as a kubectl plugin (named kubectl-rudder): its help says
	// `kubectl rudder`, and with no subcommand it prints its help instead of running the
	// operator, which `kubectl rudder run` still does.
	Plugin bool
	// Now is the time the day-2 verbs read (a CR's age, the value of reconcile-at); nil:
	// time.Now.
	Now func() time.Time
}

func (e Env) now() time.Time {
	if e.Now == nil {
		return time.Now()
	}
	return e.Now()
}

// Manager is the operator, which `rudder` runs with no subcommand and `rudder run` runs: its
// flags (controller-runtime's conventions: kubebuilder's and operator-sdk's names) and what
// runs it once they are parsed. main builds it; nil: a binary without the operator (tests).
type Manager struct {
	Flags *pflag.FlagSet
	Run   func(ctx context.Context) error
}

// usageError is a command line rudder cannot run: an unknown subcommand or flag, a missing or
// extra argument, flags that exclude each other. It exits 2 and points at the help.
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }

func (e usageError) Unwrap() error { return e.err }

// usagef is a usageError of its own words.
func usagef(format string, args ...any) error { return usageError{fmt.Errorf(format, args...)} }

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

// noArgs refuses positional arguments, naming the unknown subcommand a word most likely is.
func noArgs(cmd *cobra.Command, args []string) error {
	if len(args) == 0 {
		return nil
	}
	if cmd.HasSubCommands() {
		msg := fmt.Sprintf("unknown subcommand %q", args[0])
		if s := cmd.SuggestionsFor(args[0]); len(s) > 0 {
			msg += "; did you mean " + strings.Join(s, " or ") + "?"
		}
		var known []string
		for _, c := range cmd.Commands() {
			if c.IsAvailableCommand() {
				known = append(known, c.Name())
			}
		}
		return usagef("%s (known: %s)", msg, strings.Join(known, ", "))
	}
	return usagef("takes no arguments, got %q", args)
}

// needArgs asks for at least one positional argument, described as what.
func needArgs(what string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) == 0 {
			return usagef("at least one %s is required", what)
		}
		return nil
	}
}
