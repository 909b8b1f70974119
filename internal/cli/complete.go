package cli

import (
	"slices"

	"github.com/spf13/cobra"
)

// completeCRs completes a verb's KIND (the kinds rudder serves, by resource name) and NAME (the
// CRs of that kind in the namespace), reading the cluster as the verb's flags say (*cf, set
// once the command is made).
func completeCRs(cf **clusterFlags) cobra.CompletionFunc {
	return func(cmd *cobra.Command, args []string, _ string) ([]cobra.Completion, cobra.ShellCompDirective) {
		c, err := (*cf).connect()
		if err != nil || len(args) > 1 {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		if len(args) == 0 {
			kinds, err := c.servedKinds()
			if err != nil {
				return nil, cobra.ShellCompDirectiveNoFileComp
			}
			var out []cobra.Completion
			for _, k := range kinds {
				out = append(out, cobra.CompletionWithDesc(k.String(), k.gvk.Kind))
			}
			return out, cobra.ShellCompDirectiveNoFileComp
		}
		k, err := c.kind(args[0])
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		l, err := c.list(cmd.Context(), k)
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		var out []cobra.Completion
		for _, cr := range l.Items {
			out = append(out, cr.GetName())
		}
		slices.Sort(out)
		return out, cobra.ShellCompDirectiveNoFileComp
	}
}
