package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/yaml"

	"github.com/rudder-operator/rudder/internal/chartsource"
	"github.com/rudder-operator/rudder/internal/helm"
)

var (
	kindPattern    = regexp.MustCompile(`^[A-Z][A-Za-z0-9]*$`)
	versionPattern = regexp.MustCompile(`^v[0-9]+((alpha|beta)[0-9]+)?$`)
)

// scaffoldOptions are scaffold's flags.
type scaffoldOptions struct {
	chartDir, group, version, kind, out string
	force                               bool
	vals                                helm.ValueOptions
}

// scaffoldCommand is `rudder scaffold`.
func scaffoldCommand(env Env) *cobra.Command {
	var o scaffoldOptions
	cmd := &cobra.Command{
		Use:   "scaffold --chart DIR --group G --kind K --output OUT",
		Short: "Write a CRD, RBAC, a watches.yaml entry and a sample CR for a chart",
		Long: `Write, for a chart, what a cluster needs to serve it as a kind: a CRD with a typed spec
schema (from values.schema.json, else inferred from values.yaml), a ClusterRole for the kind
and what the chart's defaults render, a watches.yaml entry with the confinement those defaults
need (and no more), a sample CR and a kustomization applying the CRD and the role.`,
		Example: `  rudder scaffold --chart charts/ingress-nginx --group net.example.com --version v1 \
    --kind IngressNginx --output config/ingress-nginx
  kubectl apply -k config/ingress-nginx`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return scaffold(cmd.Context(), o, env) },
	}
	f := cmd.Flags()
	f.StringVar(&o.chartDir, "chart", "", "the chart directory (as watches.yaml will name it)")
	f.StringVar(&o.group, "group", "", "API group of the new kind, a DNS domain such as apps.example.com")
	f.StringVar(&o.version, "version", "v1alpha1", "API version of the new kind")
	f.StringVar(&o.kind, "kind", "", "the new kind, CamelCase")
	f.StringVar(&o.out, "output", "", "directory to write")
	f.BoolVar(&o.force, "force", false, "write into a non-empty output directory")
	valuesFlags(f, &o.vals)
	return cmd
}

// scaffold writes, for a chart, what a cluster needs to serve it as a kind: a CRD with a typed
// spec schema, a ClusterRole for the kind and what the chart renders, a watches.yaml entry, a
// sample CR and a kustomization applying the CRD and the role.
func scaffold(_ context.Context, o scaffoldOptions, env Env) error {
	stdout := env.Stdout
	if err := checkScaffoldFlags(o.chartDir, o.group, o.version, o.kind, o.out); err != nil {
		return err
	}
	ch, err := chartsource.Load(o.chartDir)
	if err != nil {
		return fmt.Errorf("--chart %s does not load: %w", o.chartDir, err)
	}
	user, err := o.vals.Merge()
	if err != nil {
		return err
	}
	if entries, err := os.ReadDir(o.out); err == nil && len(entries) > 0 && !o.force {
		return fmt.Errorf("--output %s is not empty; use --force to write into it", o.out)
	}
	gvk := schema.GroupVersionKind{Group: o.group, Version: o.version, Kind: o.kind}
	plural, _ := meta.UnsafeGuessKindToResource(gvk)

	var notes []string
	crd := scaffoldCRD(ch, gvk, plural.Resource, &notes)
	for _, n := range notes {
		fmt.Fprintf(stdout, "schema: %s\n", n)
	}
	scan, err := scanChart(ch, gvk, user)
	if err != nil {
		return err
	}
	printScan(stdout, scan)
	role := "rudder-" + plural.Resource + "." + gvk.Group
	files := map[string]any{
		"crd.yaml": crd,
		"sample.yaml": map[string]any{
			"apiVersion": gvk.GroupVersion().String(), "kind": gvk.Kind,
			"metadata": map[string]any{"name": strings.ToLower(gvk.Kind) + "-sample"},
			"spec":     helm.CoalesceValues(cloneValues(user), cloneValues(ch.Values)),
		},
		"kustomization.yaml": map[string]any{"resources": []string{"crd.yaml", "role.yaml"}},
		"role.yaml":          roleYAML(role, scan.roleRules(gvk, plural.Resource)),
		"watches.yaml":       watchYAML(gvk, o.chartDir, scan),
	}
	if err := writeYAMLFiles(o.out, files, stdout); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "next: kubectl apply -k %s; add %s to rudder's watches.yaml; kubectl apply -f %s\n",
		o.out, filepath.Join(o.out, "watches.yaml"), filepath.Join(o.out, "sample.yaml"))
	return nil
}

// printScan says what scaffold found: each kind and what renders it, what leaves the CR's
// namespace, and what the role cannot grant.
func printScan(w io.Writer, s *chartScan) {
	fmt.Fprintf(w, "kinds the chart renders (rules in role.yaml):\n")
	for _, k := range s.sortedKinds() {
		note := ""
		switch {
		case k.guessed && k.namespaced:
			note = " [not built in: resource " + k.resource + " and namespaced scope guessed]"
		case k.guessed:
			note = " [not built in: resource " + k.resource + " and cluster scope guessed]"
		}
		fmt.Fprintf(w, "  %-40s %s%s\n", k.gvk.Kind+" ("+k.gvk.GroupVersion().String()+")", strings.Join(k.how, "; "), note)
	}
	for _, l := range []struct {
		field string
		m     map[string]*sourced
	}{{"allowClusterScoped", s.cluster}, {"allowedNamespaces", s.namespaces}, {"allowAggregationLabels", s.aggregates}} {
		for _, k := range sortedKeys(l.m) {
			state := "allowed by watches.yaml: CR authors can act on it through values"
			if !l.m[k].byDefault {
				state = "only with other values: left commented out in watches.yaml"
			}
			fmt.Fprintf(w, "outside the namespace: %s %s (%s)\n", l.field, k, state)
		}
	}
	for _, warn := range s.warnings {
		fmt.Fprintf(w, "warning: %s\n", warn)
	}
}

// valuesFlags are helm template's --values (-f), --set and --set-string, repeatable.
func valuesFlags(f *pflag.FlagSet, vals *helm.ValueOptions) {
	f.StringArrayVarP(&vals.ValueFiles, "values", "f", nil,
		"a values file, as helm template -f (repeatable): feeds the render that finds kinds, and the sample")
	f.StringArrayVar(&vals.Values, "set", nil, "a value, as helm template --set (repeatable)")
	f.StringArrayVar(&vals.StringValues, "set-string", nil, "a string value, as helm template --set-string (repeatable)")
}

// writeYAMLFiles writes each value as YAML into dir under its name, in name order.
func writeYAMLFiles(dir string, files map[string]any, stdout io.Writer) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		var b []byte
		switch v := files[n].(type) {
		case string: // written with comments
			b = []byte(v)
		default:
			var err error
			if b, err = yaml.Marshal(v); err != nil {
				return err
			}
		}
		if err := os.WriteFile(filepath.Join(dir, n), b, 0o644); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "wrote %s\n", filepath.Join(dir, n))
	}
	return nil
}

func checkScaffoldFlags(chartDir, group, version, kind, out string) error {
	var errs []string
	if chartDir == "" {
		errs = append(errs, "--chart is required")
	}
	if out == "" {
		errs = append(errs, "--output is required")
	}
	if es := validation.IsDNS1123Subdomain(group); len(es) > 0 || !strings.Contains(group, ".") {
		errs = append(errs, fmt.Sprintf("--group %q must be a DNS domain with a dot, such as apps.example.com", group))
	}
	if !versionPattern.MatchString(version) {
		errs = append(errs, fmt.Sprintf("--version %q must look like v1, v1alpha1 or v2beta3", version))
	}
	if !kindPattern.MatchString(kind) {
		errs = append(errs, fmt.Sprintf("--kind %q must be CamelCase, such as MyApp", kind))
	}
	if len(errs) > 0 {
		return errors.New(strings.Join(errs, "; "))
	}
	return nil
}

// scaffoldCRD is the CRD of the new kind: spec from values.schema.json (or inferred from
// values.yaml), rudder's status, the status subresource and printer columns.
func scaffoldCRD(ch *helm.Chart, gvk schema.GroupVersionKind, plural string, notes *[]string) *apiextensionsv1.CustomResourceDefinition {
	var spec apiextensionsv1.JSONSchemaProps
	var js map[string]any
	if len(ch.Schema) > 0 && json.Unmarshal(ch.Schema, &js) == nil {
		spec = fromJSONSchema(js, "spec", notes)
		spec.Type = "object"
		*notes = append(*notes, "spec from values.schema.json")
	} else {
		spec = inferSchema(ch.Values)
		if len(ch.Values) == 0 {
			spec = apiextensionsv1.JSONSchemaProps{Type: "object", XPreserveUnknownFields: new(true)}
		}
		*notes = append(*notes, "spec inferred from the types of values.yaml (no values.schema.json)")
	}
	spec.Description = fmt.Sprintf("Values of chart %s (%s), as the CR's spec.", ch.Name(), ch.Metadata.Version)
	return &apiextensionsv1.CustomResourceDefinition{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apiextensions.k8s.io/v1", Kind: "CustomResourceDefinition"},
		ObjectMeta: metav1.ObjectMeta{Name: plural + "." + gvk.Group},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: gvk.Group,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Kind: gvk.Kind, ListKind: gvk.Kind + "List",
				Plural: plural, Singular: strings.ToLower(gvk.Kind), Categories: []string{Category}},
			Scope: apiextensionsv1.NamespaceScoped,
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{
				Name: gvk.Version, Served: true, Storage: true,
				Subresources: &apiextensionsv1.CustomResourceSubresources{Status: &apiextensionsv1.CustomResourceSubresourceStatus{}},
				AdditionalPrinterColumns: []apiextensionsv1.CustomResourceColumnDefinition{
					{Name: "Ready", Type: "string", JSONPath: `.status.conditions[?(@.type=="Ready")].status`},
					{Name: "Revision", Type: "integer", JSONPath: ".status.release.revision"},
					{Name: "Age", Type: "date", JSONPath: ".metadata.creationTimestamp"},
				},
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
					Type: "object",
					Properties: map[string]apiextensionsv1.JSONSchemaProps{
						"apiVersion": {Type: "string"}, "kind": {Type: "string"}, "metadata": {Type: "object"},
						"spec":   spec,
						"status": statusSchema(),
					},
				}},
			}},
		},
	}
}

// statusSchema is what rudder writes under status (api/status.Common); release stays open for
// fields later versions add.
func statusSchema() apiextensionsv1.JSONSchemaProps {
	str := apiextensionsv1.JSONSchemaProps{Type: "string"}
	return apiextensionsv1.JSONSchemaProps{
		Type: "object", Description: "Written by rudder.",
		Properties: map[string]apiextensionsv1.JSONSchemaProps{
			"observedGeneration": {Type: "integer", Format: "int64"},
			"conditions": {
				Type: "array", XListType: new("map"), XListMapKeys: []string{"type"},
				Items: &apiextensionsv1.JSONSchemaPropsOrArray{Schema: &apiextensionsv1.JSONSchemaProps{
					Type: "object", Required: []string{"type", "status"},
					Properties: map[string]apiextensionsv1.JSONSchemaProps{
						"type": str, "status": str, "reason": str, "message": str,
						"lastTransitionTime": {Type: "string", Format: "date-time"},
						"observedGeneration": {Type: "integer", Format: "int64"},
					},
				}},
			},
			"release":   {Type: "object", XPreserveUnknownFields: new(true), Description: "The Helm release: name, revision, chart, digests."},
			"inventory": inventorySchema(),
		},
	}
}

// inventorySchema is status.inventory (api/status.Inventory).
func inventorySchema() apiextensionsv1.JSONSchemaProps {
	str := apiextensionsv1.JSONSchemaProps{Type: "string"}
	return apiextensionsv1.JSONSchemaProps{
		Type: "object", Description: "The objects of the release's deployed revision.",
		Properties: map[string]apiextensionsv1.JSONSchemaProps{
			"revision":  {Type: "integer"},
			"count":     {Type: "integer"},
			"truncated": {Type: "boolean"},
			"entries": {
				Type: "array", XListType: new("atomic"),
				Items: &apiextensionsv1.JSONSchemaPropsOrArray{Schema: &apiextensionsv1.JSONSchemaProps{
					Type: "object", Required: []string{"apiVersion", "kind", "name"},
					Properties: map[string]apiextensionsv1.JSONSchemaProps{"apiVersion": str, "kind": str, "namespace": str, "name": str},
				}},
			},
		},
	}
}
