package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"
	"sigs.k8s.io/yaml"

	"github.com/rudder-operator/rudder/internal/chartsource"
	"github.com/rudder-operator/rudder/internal/helm"
	"github.com/rudder-operator/rudder/internal/watches"
)

// lintCommand is `rudder lint`.
func lintCommand(env Env) *cobra.Command {
	var wf, valuesFrom string
	cmd := &cobra.Command{
		Use:   "lint [CR_FILE...]",
		Short: "Check watches.yaml, every chart (helm lint --strict) and CR files",
		Long: `Check watches.yaml (every field), every chart it names (Helm's lint, strict: its warnings
fail too; a chart without values.schema.json is a warning of rudder's, since CRs of its kind
are then not validated) and each CR file given, rendered as 'rudder template' renders it.
Findings are printed one per line as "file: severity: message"; any error fails (exit 1).`,
		Example: `  # in CI, before a chart or watches.yaml edit is merged
  rudder lint --watches-file watches.yaml config/samples/*.yaml`,
		RunE: func(cmd *cobra.Command, files []string) error {
			return lint(cmd.Context(), wf, valuesFrom, files, env)
		},
	}
	cmd.Flags().StringVar(&wf, "watches-file", "./watches.yaml", "watches.yaml mapping each kind to its chart")
	cmd.Flags().StringVar(&valuesFrom, "values-from", "",
		"directory holding what the watches' valuesFrom sources hold, as files DIR/<kind>/<name>/<key> (a missing one is left out)")
	return cmd
}

// lint checks watches file wf, its charts and the CRs of files; see lintCommand.
func lint(ctx context.Context, wf, valuesFrom string, files []string, env Env) error {
	stdout := env.Stdout
	errs, warnings := 0, 0
	report := func(file, severity, msg string) {
		fmt.Fprintf(stdout, "%s: %s: %s\n", file, severity, msg)
		if severity == "error" {
			errs++
		} else {
			warnings++
		}
	}
	ws, err := watches.Load(wf)
	if err != nil {
		report(wf, "error", err.Error())
		return summary(stdout, errs, warnings)
	}
	seen := map[string]bool{}
	for _, w := range ws {
		lintCRDPolicy(wf, w, report)
		lintReleaseName(wf, w, report)
		path := w.ChartPath()
		if seen[path] {
			continue
		}
		seen[path] = true
		lintChart(path, watches.CheckValuesOf(ws, path), report)
	}
	r, err := newRenderer(wf, renderOptions{kubeVersion: defaultKubeVersion(), valuesFrom: valuesFrom}, env.Hooks)
	if err != nil {
		return err
	}
	// The sources are the cluster's: a CR is rendered with those given, and without the rest.
	r.anyMissing = true
	for _, file := range files {
		crs, err := readCRs(file)
		if err != nil {
			report(file, "error", err.Error())
			continue
		}
		for _, cr := range crs {
			if _, err := r.render(ctx, cr); err != nil {
				report(file, "error", fmt.Sprintf("%s: %v", describeCR(cr), err))
			}
		}
	}
	return summary(stdout, errs, warnings)
}

// lintCRDPolicy checks a watch's crds policy against its chart's crds/ (of the chart and its
// subcharts): an install fails on crds/ the watch does not allow, and a policy for a chart
// without crds/ does nothing.
func lintCRDPolicy(file string, w *watches.Watch, report func(file, severity, msg string)) {
	ch, err := chartsource.Load(w.ChartPath())
	if err != nil {
		return // lintChart says why
	}
	crds, p := len(ch.CRDObjects()) > 0, w.Policies().CRDPolicy()
	switch {
	case crds && p.Install == helm.CRDsCreate && !w.Policies().AllowsCRDs():
		report(file, "error",
			fmt.Sprintf("%s: the chart has crds/, which its install applies (crds.install: Create) only where allowClusterScoped names "+
				"CustomResourceDefinition: allow it, or set crds.install: Skip", w))
	case !crds && w.CRDs != nil:
		report(file, "warning", fmt.Sprintf("%s: crds: the chart has no crds/ (of its own or its subcharts'): the policy does nothing", w))
	}
}

// lintReleaseName warns of a watch whose chart names cluster-scoped objects after the
// release, while its releaseName leaves the CR's namespace out: the first CR of a name takes
// them, and a CR of that name in any other namespace is refused for good.
func lintReleaseName(file string, w *watches.Watch, report func(file, severity, msg string)) {
	if len(w.AllowClusterScoped) == 0 || strings.Contains(w.ReleaseName, ".metadata.namespace") {
		return
	}
	ch, err := chartsource.Load(w.ChartPath())
	if err != nil {
		return // lintChart says why
	}
	s, err := scanChart(ch, w.GroupVersionKind(), w.CheckValues)
	if err != nil || len(s.clusterNamed) == 0 {
		return
	}
	report(file, "warning",
		fmt.Sprintf("%s: the chart names cluster-scoped objects after the release (%s), and releaseName leaves the CR's namespace out: "+
			"a CR of the same name in another namespace finds them taken; set releaseName: %q", w, strings.Join(sortedKeys(s.clusterNamed), ", "),
			NamespacedReleaseName))
}

// lintChart is Helm's strict lint of the chart at path, with check (the watches' checkValues)
// on top of its defaults.
func lintChart(path string, check map[string]any, report func(file, severity, msg string)) {
	for _, m := range chartsource.Lint(path, check) {
		report(m.File, m.Severity, m.Err.Error())
	}
	if _, err := os.Stat(filepath.Join(path, "values.schema.json")); errors.Is(err, os.ErrNotExist) {
		report(path, "warning",
			"no values.schema.json: the API server and rudder validate nothing of its CRs' spec (rudder scaffold can still infer a CRD schema from "+
				"values.yaml)")
	}
	if b, err := os.ReadFile(filepath.Join(path, "values.yaml")); err == nil {
		var v map[string]any
		if err := yaml.Unmarshal(b, &v); err != nil {
			report(filepath.Join(path, "values.yaml"), "error", err.Error())
		}
	}
}

func summary(w io.Writer, errs, warnings int) error {
	fmt.Fprintf(w, "%d error(s), %d warning(s)\n", errs, warnings)
	if errs > 0 {
		return fmt.Errorf("%d error(s)", errs)
	}
	return nil
}
