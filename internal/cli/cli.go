package cli

import (
	"context"
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/rudder-operator/rudder/internal/hook"
)

// Run runs rudder's offline subcommands (args without the program's name; no operator):
// Execute without a Manager.
func Run(ctx context.Context, args []string, env Env) int { return Execute(ctx, args, env, nil) }

// Execute runs rudder's command line (args without the program's name) and returns the
// process's exit code: 0; 1 for what a subcommand found wrong (printed to stderr); 2 for a
// command line it cannot run; a subcommand's own codes (diff's). Help, asked for in any way
// (`rudder help CMD`, `CMD -h`, `CMD --help`), exits 0.
func Execute(ctx context.Context, args []string, env Env, mgr *Manager) int {
	root := NewCommand(env, mgr)
	root.SetArgs(args)
	cmd, err := root.ExecuteContextC(ctx)
	var ee *exitError
	var ue usageError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ee):
		if ee.err != nil {
			fmt.Fprintf(env.Stderr, "%s: %v\n", cmd.CommandPath(), ee.err)
		}
		return ee.code
	case errors.As(err, &ue):
		fmt.Fprintf(env.Stderr, "%s: %v\nSee '%s --help'.\n", cmd.CommandPath(), ue.err, cmd.CommandPath())
		return 2
	default:
		fmt.Fprintf(env.Stderr, "%s: %v\n", cmd.CommandPath(), err)
		return 1
	}
}

// NewCommand is rudder's command tree: the operator (mgr) at the root and as `run`, and the
// offline tools beside it, with cobra's help and completion.
func NewCommand(env Env, mgr *Manager) *cobra.Command {
	if env.Hooks == nil {
		env.Hooks = hook.NewRegistry()
	}
	root := &cobra.Command{
		Use:   "rudder",
		Short: "A hybrid Helm operator: one Helm release per custom resource",
		Long: `rudder serves every kind watches.yaml lists: each custom resource's spec becomes the values
of a Helm release of the kind's chart, one release per CR, kept as the CR says.

With no subcommand rudder runs the operator (as 'rudder run' does). scaffold, template, lint
and diff need no cluster (but for 'diff --cluster'); get, reconcile, suspend, resume, history,
rollback and tree act on the CRs of a cluster, as kubectl does (also as 'kubectl rudder').`,
		Example: `  # the operator, as config/manager runs it
  rudder --leader-elect --watches-file /etc/rudder/watches.yaml

  # every CR rudder serves, in every namespace
  rudder get -A

  # serve a public chart as a kind of its own
  rudder scaffold --chart charts/redis --group cache.example.com --kind Redis --output config/redis`,
		SilenceUsage:               true,
		SilenceErrors:              true,
		SuggestionsMinimumDistance: 2,
		Args:                       noArgs,
		// cobra checks flag groups (diff's exclusive modes) after this, as plain errors: they
		// are checked here first, so that they are usage errors too.
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			if err := cmd.ValidateRequiredFlags(); err != nil {
				return usageError{err}
			}
			if err := cmd.ValidateFlagGroups(); err != nil {
				return usageError{err}
			}
			return nil
		},
	}
	root.SetOut(env.Stdout)
	root.SetErr(env.Stderr)
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err} })
	if env.Plugin {
		root.Annotations = map[string]string{cobra.CommandDisplayNameAnnotation: "kubectl rudder"}
	}
	addSubcommands(root, env, mgr)
	return root
}

// addSubcommands puts the operator (`run`, and at the root), the offline tools and the day-2
// verbs under root.
func addSubcommands(root *cobra.Command, env Env, mgr *Manager) {
	run := managerCommand(mgr)
	root.AddCommand(run)
	switch {
	case env.Plugin || mgr == nil:
		root.RunE = func(cmd *cobra.Command, _ []string) error { return cmd.Help() }
	default:
		root.Flags().AddFlagSet(mgr.Flags)
		root.RunE = run.RunE
	}
	root.AddGroup(&cobra.Group{ID: "offline", Title: "Charts and kinds (no cluster; diff --cluster reads one):"},
		&cobra.Group{ID: "day2", Title: "CRs in a cluster (kubectl's flags: --kubeconfig, --context, -n):"})
	for _, c := range []*cobra.Command{scaffoldCommand(env), templateCommand(env), lintCommand(env), diffCommand(env)} {
		c.GroupID = "offline"
		root.AddCommand(c)
	}
	for _, c := range []*cobra.Command{getCommand(env), reconcileCommand(env), suspendCommand(env, false), suspendCommand(env, true),
		historyCommand(env), rollbackCommand(env), treeCommand(env)} {
		c.GroupID = "day2"
		root.AddCommand(c)
	}
	root.AddCommand(versionCommand(env))
}

// managerCommand is `rudder run`: the operator, with the root's flags (mgr nil: a binary
// without it, such as a test's).
func managerCommand(mgr *Manager) *cobra.Command {
	run := &cobra.Command{
		Use:   "run [flags]",
		Short: "Run the operator (the default with no subcommand)",
		Long: `Run the operator: every kind watches.yaml lists is served, one Helm release per CR, in the
namespaces of --watch-namespace (all by default), as the identity of the kubeconfig
(--kubeconfig, $KUBECONFIG, the in-cluster ServiceAccount, then ~/.kube/config: controller-
runtime's order).`,
		Example: `  # against a local control plane, metrics over plain HTTP
  rudder run --kubeconfig dev/kubeconfig --watches-file ./watches.yaml \
    --metrics-bind-address 127.0.0.1:18080 --metrics-secure=false`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if mgr == nil {
				return errors.New("this build has no operator: build rudder's main package")
			}
			return mgr.Run(cmd.Context())
		},
	}
	if mgr != nil {
		run.Flags().AddFlagSet(mgr.Flags)
	}
	return run
}
