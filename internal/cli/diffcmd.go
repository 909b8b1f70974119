package cli

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"
)

// diffOptions are diff's flags.
type diffOptions struct {
	from, watchesFile, kubeconfig, namespace, shard string
	cluster, record                                 bool
	render                                          renderOptions
}

// diffCommand is `rudder diff`: what a chart edit would do to each CR before it is made live.
// Each CR is rendered as `rudder template` renders it, with the watches (and so the charts and
// their layers) of --watches-file, as edited, and compared with what it is rendered from now:
//   - offline, for the CR files given: with the watches of --from, as they are live;
//   - with --cluster, for every CR of each edited watch's kind in the cluster of --kubeconfig
//     (in --namespace, or all): with its release's newest revision as Helm stored it; each
//     object that changes is asked about with a server-side dry run of its update, which says
//     which need upgrade.force.
//
// For each CR it prints the unified diff of every object that changes, is added or removed
// (manifest and hooks), in kubectl diff's form, and says which CRs the edit makes fail, and
// why: their values no longer validate, the chart no longer renders, or what it renders breaks
// the watch's confinement or a limit. Exit codes are diff(1)'s: 0 when nothing changes, 1 when
// something does, 2 on trouble (a flag, a file that cannot be read, a watches file that does
// not load, a cluster that cannot be read).
func diffCommand(env Env) *cobra.Command {
	var o diffOptions
	cmd := &cobra.Command{
		Use:   "diff (--from LIVE_WATCHES CR_FILE... | --cluster [--namespace NS | --record])",
		Short: "Show what a chart edit would change for each CR, before it is live",
		Long: `Show what a chart or watches.yaml edit would change for each CR before it is live: every
object that changes, is added or removed, in kubectl diff's form, and which CRs the edit makes
fail, and why. Each CR is rendered with the watches of --watches-file (as edited) and compared
with what it is rendered from now:
  --from LIVE_WATCHES CR_FILE...  offline: the CR files, rendered with the live watches too;
  --cluster                       every CR of the edited kinds in the cluster (in --namespace,
                                  or all), against its release's newest revision; a server-side
                                  dry run says which objects need upgrade.force.
Exit codes are diff(1)'s: 0 when nothing changes, 1 when something does, 2 on trouble.`,
		Example: `  # offline, in a chart's pull request
  rudder diff --from live/watches.yaml --watches-file watches.yaml config/samples/*.yaml

  # against the cluster, recording the summary on the edit's Rollout
  rudder diff --cluster --record --watches-file watches.yaml`,
		RunE: func(cmd *cobra.Command, files []string) error {
			if err := checkDiffArgs(o, files); err != nil {
				return err
			}
			return diff(cmd.Context(), o, files, env)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.from, "from", "", "watches.yaml as it is live (its charts as they are live): what the CR files are rendered from now")
	f.StringVar(&o.watchesFile, "watches-file", "./watches.yaml", "watches.yaml as edited (its charts as edited)")
	f.BoolVar(&o.cluster, "cluster", false, "compare every CR of the edited watches' kinds in the cluster with its release's newest revision")
	f.StringVar(&o.kubeconfig, "kubeconfig", "", "with --cluster: the kubeconfig file (default: $KUBECONFIG, then ~/.kube/config)")
	f.StringVarP(&o.namespace, "namespace", "n", "", "with --cluster: only the CRs of this namespace (default: all)")
	f.BoolVar(&o.record, "record", false,
		"with --cluster and every namespace: record each kind's summary on the Rollout of the edit (a watch's rollout policy; one that starts "+
			"paused waits for it)")
	f.StringVar(&o.shard, "shard", "", "with --record: the --watch-label-selector of the rudder shard whose Rollout it is")
	renderFlags(f, &o.render)
	cmd.MarkFlagsOneRequired("from", "cluster")
	cmd.MarkFlagsMutuallyExclusive("from", "cluster")
	cmd.MarkFlagsMutuallyExclusive("record", "namespace")
	return cmd
}

// checkDiffArgs refuses what cobra's flag groups do not say: files go with --from alone, and
// --record, --kubeconfig, --namespace and --shard need --cluster (--shard needs --record).
func checkDiffArgs(o diffOptions, files []string) error {
	switch {
	case o.from != "" && len(files) == 0:
		return usagef("--from needs the CR files to render")
	case o.cluster && len(files) > 0:
		return usagef("--cluster reads the CRs from the cluster: no CR files, got %q", files)
	case !o.cluster && (o.record || o.kubeconfig != "" || o.namespace != ""):
		return usagef("--record, --kubeconfig and --namespace go with --cluster")
	case o.shard != "" && !o.record:
		return usagef("--shard goes with --record")
	}
	return nil
}

// diff runs `rudder diff` once its command line is checked; see diffCommand.
func diff(ctx context.Context, o diffOptions, files []string, env Env) error {
	after, err := newRenderer(o.watchesFile, o.render, env.Hooks)
	if err != nil {
		return trouble(fmt.Errorf("--watches-file: %w", err))
	}
	var differ bool
	if o.cluster {
		differ, err = diffCluster(ctx, env.Stdout, after, o.kubeconfig, o.namespace, o.record, o.shard)
	} else {
		differ, err = diffFiles(ctx, env.Stdout, after, o.from, o.render, env, files)
	}
	switch {
	case err != nil:
		return trouble(err)
	case differ:
		return errDiffers
	}
	return nil
}
