package cli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"

	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	"github.com/rudder-operator/rudder/internal/chartsource"
	"github.com/rudder-operator/rudder/internal/guard"
	"github.com/rudder-operator/rudder/internal/helm"
	"github.com/rudder-operator/rudder/internal/hook"
	"github.com/rudder-operator/rudder/internal/records"
	"github.com/rudder-operator/rudder/internal/release"
	"github.com/rudder-operator/rudder/internal/watches"
)

// The renderer the offline commands share (template, diff, lint, scaffold): a watches file,
// its charts and CRs rendered as an install would, with no cluster.

// errValuesSchema: a CR's values do not match its chart's values.schema.json.
var errValuesSchema = errors.New("values do not match the chart's values.schema.json")

// defaultKubeVersion is the Kubernetes minor rudder is built against (its client-go), which
// charts with a kubeVersion constraint care about; Helm's own default is far older.
func defaultKubeVersion() string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, d := range bi.Deps {
			if d.Path == "k8s.io/client-go" && strings.HasPrefix(d.Version, "v0.") {
				return "v1." + strings.TrimPrefix(d.Version, "v0.")
			}
		}
	}
	return builtAgainst
}

// builtAgainst is the Kubernetes version of go.mod's k8s.io modules, for binaries whose build
// information lacks them (test binaries).
const builtAgainst = "v1.37.0"

// renderer builds releases for CRs the way the reconciler does, without a cluster.
type renderer struct {
	watches map[schema.GroupVersionKind]*watches.Watch
	file    string
	hooks   *hook.Registry
	mapper  meta.RESTMapper
	caps    *helm.Capabilities
	// valuesFrom is the directory of the sources' content ("": every source is missing);
	// anyMissing renders a CR whose sources are missing without them (lint).
	valuesFrom string
	anyMissing bool
}

// renderOptions are how a subcommand renders CRs offline (renderFlags).
type renderOptions struct {
	kubeVersion, apiVersions string
	// valuesFrom is the directory of the valuesFrom sources' content.
	valuesFrom string
}

// renderFlags are the flags of the subcommands that render CRs as the reconciler does.
func renderFlags(fs *pflag.FlagSet, o *renderOptions) {
	fs.StringVar(&o.kubeVersion, "kube-version", defaultKubeVersion(), "Kubernetes version for .Capabilities")
	fs.StringVar(&o.apiVersions, "api-versions", "", "comma-separated extra API versions for .Capabilities.APIVersions")
	fs.StringVar(&o.valuesFrom, "values-from", "",
		"directory holding what the watches' valuesFrom sources hold, as files DIR/<kind>/<name>/<key>")
}

func newRenderer(watchesFile string, opts renderOptions, hooks *hook.Registry) (*renderer, error) {
	kubeVersion, apiVersions := opts.kubeVersion, opts.apiVersions
	ws, err := watches.Load(watchesFile)
	if err != nil {
		return nil, err
	}
	r := &renderer{watches: map[schema.GroupVersionKind]*watches.Watch{}, file: watchesFile, valuesFrom: opts.valuesFrom,
		hooks: hooks, mapper: helm.StaticMapper()}
	for _, w := range ws {
		r.watches[w.GroupVersionKind()] = w
	}
	var extra []string
	for _, v := range strings.Split(apiVersions, ",") {
		if v = strings.TrimSpace(v); v != "" {
			extra = append(extra, v)
		}
	}
	if r.caps, err = helm.NewCapabilities(kubeVersion, extra...); err != nil {
		return nil, fmt.Errorf("--kube-version: %w", err)
	}
	return r, nil
}

// render builds a CR's release exactly as a pass does before it installs: release name,
// values (spec ⊕ overrideValues), the kind's PreRelease hooks (a hold is ignored: the output
// is what would be applied once the hook lets it), schema validation, confinement.
func (r *renderer) render(ctx context.Context, cr *unstructured.Unstructured) (*release.Release, error) {
	gvk := cr.GroupVersionKind()
	w := r.watches[gvk]
	if w == nil {
		return nil, fmt.Errorf("no watch for %s in %s", gvk, r.file)
	}
	if cr.GetNamespace() == "" {
		cr.SetNamespace("default")
	}
	ch, err := chartsource.Load(w.ChartPath())
	if err != nil {
		return nil, fmt.Errorf("chart %s: %w", w.ChartPath(), err)
	}
	name, err := w.ReleaseNameOf(cr)
	if err != nil {
		return nil, err
	}
	base, err := r.sources(w, cr)
	if err != nil {
		return nil, err
	}
	values, overridden, err := w.Values(cr, base)
	if err != nil {
		return nil, err
	}
	for _, h := range r.hooks.PreReleaseHooks(gvk) {
		if _, err := h.PreRelease(ctx, cr, values); err != nil {
			return nil, fmt.Errorf("pre-release hook: %w", err)
		}
	}
	if err := helm.ValidateValues(ch, values); err != nil {
		return nil, fmt.Errorf("%w: %w", errValuesSchema, err)
	}
	vd, err := records.ValuesDigest(values)
	if err != nil {
		return nil, err
	}
	req := w.Request(cr, w.Scope(cr, ""), name, ch, "", values, vd,
		helm.Description("install", cr.GetGeneration(), ch, "", vd, overridden))
	return helm.Render(req, r.mapper, r.caps)
}

// crds are the CustomResourceDefinitions of the chart's crds/ that an install of the CR's
// release applies (crds.install: Create, the default), checked as the install checks them:
// only where allowClusterScoped names CustomResourceDefinition.
func (r *renderer) crds(cr *unstructured.Unstructured, rel *release.Release) ([]guard.CRDFile, error) {
	w := r.watches[cr.GroupVersionKind()]
	crds := helm.CRDFiles(helm.ChartOf(rel))
	if len(crds) == 0 || w.Policies().CRDPolicy().Install == helm.CRDsSkip {
		return nil, nil
	}
	if err := w.Scope(cr, "").Confinement.CheckCRDs(r.mapper, crds); err != nil {
		return nil, err
	}
	return crds, nil
}

// sources reads what the CR's valuesFrom sources hold from files DIR/<kind>/<name>/<key>, as
// the reconciler reads the objects: a missing file is a missing source.
func (r *renderer) sources(w *watches.Watch, cr *unstructured.Unstructured) (map[string]any, error) {
	srcs, err := w.SourcesOf(cr)
	if err != nil || len(srcs) == 0 {
		return nil, err
	}
	contents := make([][]byte, len(srcs))
	for i, s := range srcs {
		srcs[i].Optional = s.Optional || r.anyMissing
		if r.valuesFrom == "" {
			continue
		}
		b, err := os.ReadFile(filepath.Join(r.valuesFrom, s.Kind, s.Name, s.Key))
		switch {
		case errors.Is(err, fs.ErrNotExist):
		case err != nil:
			return nil, fmt.Errorf("--values-from: %w", err)
		default:
			contents[i] = b
		}
	}
	base, err := watches.MergeSources(srcs, contents)
	if errors.Is(err, watches.ErrSourceMissing) && r.valuesFrom == "" {
		err = fmt.Errorf("%w (give its content with --values-from DIR)", err)
	}
	return base, err
}

// readCRs reads every object of a YAML file ("-": standard input).
func readCRs(file string) ([]*unstructured.Unstructured, error) {
	var data []byte
	var err error
	if file == "-" {
		data, err = io.ReadAll(os.Stdin)
	} else {
		data, err = os.ReadFile(file)
	}
	if err != nil {
		return nil, err
	}
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	var out []*unstructured.Unstructured
	for {
		var m map[string]any
		if err := dec.Decode(&m); err != nil {
			if errors.Is(err, io.EOF) {
				return out, nil
			}
			return nil, fmt.Errorf("%s: %w", file, err)
		}
		if len(m) == 0 {
			continue
		}
		u := &unstructured.Unstructured{Object: m}
		if u.GetKind() == "" || u.GetAPIVersion() == "" {
			return nil, fmt.Errorf("%s: an object without apiVersion and kind", file)
		}
		out = append(out, u)
	}
}

func describeCR(cr *unstructured.Unstructured) string {
	return fmt.Sprintf("%s %s/%s", cr.GetKind(), cr.GetNamespace(), cr.GetName())
}
