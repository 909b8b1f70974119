package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/rudder-operator/rudder/internal/guard"
	"github.com/rudder-operator/rudder/internal/release"
)

// templateCommand is `rudder template`.
func templateCommand(env Env) *cobra.Command {
	var (
		wf   string
		opts renderOptions
	)
	cmd := &cobra.Command{
		Use:   "template CR_FILE...",
		Short: "Print what rudder would apply for each CR, without a cluster",
		Long: `Print what rudder would apply for each CR of the files given: its release rendered as the
reconciler renders it (the watch's values, layers, Go hooks, post-renderers and limits), with
its manifest, hooks and the CRDs its crds policy installs, in helm template's form. A CR the
reconciler would refuse (its values, the watch's confinement, a limit) fails with the reason.`,
		Example: `  rudder template --watches-file watches.yaml config/samples/*.yaml

  # with what the watches' valuesFrom sources hold, as files DIR/<kind>/<name>/<key>
  rudder template --values-from testdata/sources config/samples/app.yaml`,
		Args: needArgs("CR file"),
		RunE: func(cmd *cobra.Command, files []string) error { return template(cmd.Context(), wf, opts, files, env) },
	}
	cmd.Flags().StringVar(&wf, "watches-file", "./watches.yaml", "watches.yaml mapping each kind to its chart")
	renderFlags(cmd.Flags(), &opts)
	return cmd
}

// template prints what rudder would apply for each CR of files.
func template(ctx context.Context, wf string, opts renderOptions, files []string, env Env) error {
	stdout := env.Stdout
	r, err := newRenderer(wf, opts, env.Hooks)
	if err != nil {
		return err
	}
	var failed []string
	for _, file := range files {
		crs, err := readCRs(file)
		if err != nil {
			failed = append(failed, err.Error())
			continue
		}
		for _, cr := range crs {
			rel, err := r.render(ctx, cr)
			var crds []guard.CRDFile
			if err == nil {
				crds, err = r.crds(cr, rel)
			}
			if err != nil {
				failed = append(failed, fmt.Sprintf("%s: %s: %v", file, describeCR(cr), err))
				continue
			}
			writeRelease(stdout, cr, rel, crds)
		}
	}
	if len(failed) > 0 {
		return errors.New(strings.Join(failed, "\n"))
	}
	return nil
}

// writeRelease prints a release like `helm template --include-crds`: the CRDs of crds/ the
// install applies first, the manifest as rudder applies it, then the hooks, each under a
// comment naming where it comes from.
func writeRelease(w io.Writer, cr *unstructured.Unstructured, rel *release.Release, crds []guard.CRDFile) {
	fmt.Fprintf(w, "# %s: release %s in namespace %s\n", describeCR(cr), rel.Name, rel.Namespace)
	for _, crd := range crds {
		fmt.Fprintf(w, "---\n# Source: %s (crds.install: Create)\n%s\n", crd.Name, strings.TrimSpace(string(crd.Data)))
	}

	// Helm stores each file of the manifest under its "# Source:" line, as `helm template`
	// prints it, the last one ending in a blank line, which is left out.
	if m := strings.TrimRight(rel.Manifest, "\n"); m != "" {
		fmt.Fprintln(w, m)
	}
	hooks := append([]*release.Hook(nil), rel.Hooks...)
	sort.SliceStable(hooks, func(i, j int) bool { return hooks[i].Weight < hooks[j].Weight })
	for _, h := range hooks {
		fmt.Fprintf(w, "---\n# Hook (%s): %s\n%s\n", strings.Join(h.Events, ","), h.Path, strings.TrimSpace(h.Manifest))
	}
}
