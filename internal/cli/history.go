package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/cli-runtime/pkg/printers"
	"sigs.k8s.io/yaml"

	"github.com/rudder-operator/rudder/internal/helm"
	"github.com/rudder-operator/rudder/internal/release"
)

// historyCommand is `rudder history KIND NAME`: `helm history` of the CR's release, found by
// the name status.release gives, with the description rudder wrote on each revision.
func historyCommand(env Env) *cobra.Command {
	var output string
	var limit int
	var cf *clusterFlags
	cmd := &cobra.Command{
		Use:   "history KIND NAME",
		Short: "The Helm history of a CR's release, with rudder's description of each revision",
		Long: `The Helm history of a CR's release, as helm history prints it: each revision's time,
status, chart, app version and description. rudder's descriptions say why it made a revision
(the spec or the chart that changed, a rollback and what asked for it). It reads the release's
records (Secrets in the CR's namespace), so it needs the right to read them.

Exit status: 0, 1 when the CR or its release cannot be read, 2 for a command line it cannot run.`,
		Example: `  rudder history nginxoperator web -n demo
  rudder history at nightly -n demo -o json`,
		Args:              exactArgs("KIND NAME", 2),
		ValidArgsFunction: completeCRs(&cf),
		RunE: func(cmd *cobra.Command, args []string) error {
			switch output {
			case "", "table", "json", "yaml":
			default:
				return usagef("-o %q: must be table, json or yaml", output)
			}
			s, err := connectKind(cf, env, args[0], nil)
			if err != nil {
				return err
			}
			return s.history(cmd.Context(), args[1], output, limit)
		},
	}
	cf = addClusterFlags(cmd, false)
	cmd.Flags().StringVarP(&output, "output", "o", "", "table, json or yaml (default: a table)")
	cmd.Flags().IntVar(&limit, "max", 256, "the newest revisions to show, at most")
	return cmd
}

// revisionEntry is one revision as helm history's -o json and -o yaml print it.
type revisionEntry struct {
	Revision    int       `json:"revision"`
	Updated     time.Time `json:"updated"`
	Status      string    `json:"status"`
	Chart       string    `json:"chart"`
	AppVersion  string    `json:"app_version"`
	Description string    `json:"description"`
}

// releaseOf is the name of cr's release, as status.release gives it.
func releaseOf(cr *unstructured.Unstructured) (string, error) {
	rel := viewOf(cr).release
	if rel == nil || rel.Name == "" {
		return "", fmt.Errorf("%s: %w", crName(cr), errNotServed)
	}
	return rel.Name, nil
}

func (s *steerer) history(ctx context.Context, name, output string, limit int) error {
	cr, err := s.c.get(ctx, s.k, name)
	if err != nil {
		return err
	}
	relName, err := releaseOf(cr)
	if err != nil {
		return err
	}
	hist, err := helm.ReadHistory(s.c.cs.CoreV1().Secrets(cr.GetNamespace()), relName)
	if err != nil {
		return fmt.Errorf("%s: reading the history of release %s: %w", crName(cr), relName, err)
	}
	if len(hist) == 0 {
		return fmt.Errorf("%s: release %s has no revision", crName(cr), relName)
	}
	if limit > 0 && len(hist) > limit {
		hist = hist[len(hist)-limit:]
	}
	entries := make([]revisionEntry, 0, len(hist))
	for _, r := range hist {
		entries = append(entries, entryOf(r))
	}
	switch output {
	case "json":
		return printJSON(s.env, entries)
	case "yaml":
		out, err := yaml.Marshal(entries)
		if err != nil {
			return err
		}
		_, err = s.env.Stdout.Write(out)
		return err
	}
	tw := printers.GetNewTabWriter(s.env.Stdout)
	fmt.Fprintln(tw, "REVISION\tUPDATED\tSTATUS\tCHART\tAPP VERSION\tDESCRIPTION")
	for _, e := range entries {
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\n", e.Revision, e.Updated.Format(time.ANSIC), e.Status, e.Chart, e.AppVersion,
			oneLine(e.Description))
	}
	return tw.Flush()
}

func entryOf(r *release.Release) revisionEntry {
	return revisionEntry{Revision: r.Version, Updated: r.LastDeployed, Status: string(r.Status), Chart: r.Chart.Ref(),
		AppVersion: r.Chart.AppVersion, Description: r.Description}
}

// printJSON prints v as indented JSON.
func printJSON(env Env, v any) error {
	out, err := json.MarshalIndent(v, "", "    ")
	if err != nil {
		return err
	}
	_, err = fmt.Fprintln(env.Stdout, string(out))
	return err
}
