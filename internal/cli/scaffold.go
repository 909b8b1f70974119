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

	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/yaml"

	"github.com/rudder-operator/rudder/internal/helm"
)

// AggregateLabel marks the ClusterRoles that config/rbac's rudder-manager role aggregates: a
// scaffolded kind's role reaches rudder's ServiceAccount with no binding of its own.
const AggregateLabel = "rudder.dev/aggregate-to-manager"

var (
	kindPattern    = regexp.MustCompile(`^[A-Z][A-Za-z0-9]*$`)
	versionPattern = regexp.MustCompile(`^v[0-9]+((alpha|beta)[0-9]+)?$`)
)

// Scaffold writes, for a chart, what a cluster needs to serve it as a kind: a CRD with a typed
// spec schema, a ClusterRole for the kind and what the chart renders, a watches.yaml entry, a
// sample CR and a kustomization applying the CRD and the role.
func Scaffold(_ context.Context, args []string, env Env) error {
	stdout, stderr := env.Stdout, env.Stderr
	fs := newFlags("scaffold", "--chart DIR --group G --version V --kind K --output OUT [--force]", stderr)
	chartDir := fs.String("chart", "", "the chart directory (as watches.yaml will name it)")
	group := fs.String("group", "", "API group of the new kind, a DNS domain such as apps.example.com")
	version := fs.String("version", "v1alpha1", "API version of the new kind")
	kind := fs.String("kind", "", "the new kind, CamelCase")
	out := fs.String("output", "", "directory to write")
	force := fs.Bool("force", false, "write into a non-empty output directory")
	if err := parse(fs, args); err != nil {
		return err
	}
	if err := checkScaffoldFlags(*chartDir, *group, *version, *kind, *out); err != nil {
		fs.Usage()
		return err
	}
	ch, err := loader.Load(*chartDir)
	if err != nil {
		return fmt.Errorf("--chart %s does not load: %w", *chartDir, err)
	}
	if entries, err := os.ReadDir(*out); err == nil && len(entries) > 0 && !*force {
		return fmt.Errorf("--output %s is not empty; use --force to write into it", *out)
	}
	gvk := schema.GroupVersionKind{Group: *group, Version: *version, Kind: *kind}
	plural, _ := meta.UnsafeGuessKindToResource(gvk)

	var notes []string
	crd := scaffoldCRD(ch, gvk, plural.Resource, &notes)
	for _, n := range notes {
		fmt.Fprintf(stdout, "schema: %s\n", n)
	}
	found, err := renderedKinds(ch, gvk)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "kinds the chart renders (rules in role.yaml):\n")
	for _, k := range found {
		fmt.Fprintf(stdout, "  %-40s %s\n", k.gvk.Kind+" ("+k.gvk.GroupVersion().String()+")", strings.Join(k.how, "; "))
	}
	files := map[string]any{
		"crd.yaml":     crd,
		"role.yaml":    scaffoldRole(gvk, plural.Resource, found),
		"watches.yaml": []map[string]any{{"group": gvk.Group, "version": gvk.Version, "kind": gvk.Kind, "chart": *chartDir}},
		"sample.yaml": map[string]any{
			"apiVersion": gvk.GroupVersion().String(), "kind": gvk.Kind,
			"metadata": map[string]any{"name": strings.ToLower(gvk.Kind) + "-sample"},
			"spec":     ch.Values,
		},
		"kustomization.yaml": map[string]any{"resources": []string{"crd.yaml", "role.yaml"}},
	}
	if err := writeYAMLFiles(*out, files, stdout); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "next: kubectl apply -k %s; add %s to rudder's watches.yaml; kubectl apply -f %s\n",
		*out, filepath.Join(*out, "watches.yaml"), filepath.Join(*out, "sample.yaml"))
	return nil
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
		b, err := yaml.Marshal(files[n])
		if err != nil {
			return err
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
func scaffoldCRD(ch *chart.Chart, gvk schema.GroupVersionKind, plural string, notes *[]string) *apiextensionsv1.CustomResourceDefinition {
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
				Plural: plural, Singular: strings.ToLower(gvk.Kind)},
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
			"release": {Type: "object", XPreserveUnknownFields: new(true), Description: "The Helm release: name, revision, chart, digests."},
		},
	}
}

// kindUse is a kind the chart renders, and with which values.
type kindUse struct {
	gvk      schema.GroupVersionKind
	resource string
	how      []string
}

// renderedKinds renders the chart without a cluster with its defaults, then with each boolean
// "enabled" value switched on in turn, and returns every kind of the manifests, hooks and
// crds/ it saw.
func renderedKinds(ch *chart.Chart, owner schema.GroupVersionKind) ([]kindUse, error) {
	scope := helm.Scope{Confinement: helm.Confinement{Namespace: "default", AllowedNamespaces: []string{"*"},
		AllowClusterScoped: helm.ClusterScopedKinds(), AllowAggregationLabels: []string{"*"}}, Owner: helm.Owner{GVK: owner}}
	found := kindSet{mapper: helm.StaticMapper(), uses: map[schema.GroupKind]*kindUse{}}
	caps := chartutil.DefaultCapabilities.Copy()
	if kv, err := chartutil.ParseKubeVersion(defaultKubeVersion()); err == nil {
		caps.KubeVersion = *kv
	}
	for _, v := range valueVariants(ch) {
		c, err := loader.LoadFiles(bufferedFiles(ch))
		if err != nil {
			return nil, err
		}
		req := &helm.Request{Scope: scope, ReleaseName: "scaffold", Chart: c, Values: v.values}
		rel, err := helm.Render(req, found.mapper, caps)
		if err != nil {
			if v.how == "defaults" {
				return nil, fmt.Errorf("rendering the chart with its defaults: %w", err)
			}
			fmt.Fprintf(os.Stderr, "rudder scaffold: not rendered with %s: %v\n", v.how, err)
			continue
		}
		docs := []string{rel.Manifest}
		for _, h := range rel.Hooks {
			docs = append(docs, h.Manifest)
		}
		for _, d := range docs {
			for _, obj := range splitObjects(d) {
				found.add(obj.GroupVersionKind(), v.how)
			}
		}
	}
	if len(ch.CRDObjects()) > 0 {
		found.add(schema.GroupVersionKind{Group: "apiextensions.k8s.io", Version: "v1", Kind: "CustomResourceDefinition"},
			"crds/ (installed only where the watch's allowClusterScoped names CustomResourceDefinition)")
	}
	out := make([]kindUse, 0, len(found.uses))
	for _, u := range found.uses {
		out = append(out, *u)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].gvk.String() < out[j].gvk.String() })
	return out, nil
}

// kindSet collects the kinds a chart renders, with up to three reasons each.
type kindSet struct {
	mapper meta.RESTMapper
	uses   map[schema.GroupKind]*kindUse
}

func (k kindSet) add(gvk schema.GroupVersionKind, how string) {
	u := k.uses[gvk.GroupKind()]
	if u == nil {
		m, err := k.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			return
		}
		u = &kindUse{gvk: gvk, resource: m.Resource.Resource}
		k.uses[gvk.GroupKind()] = u
	}
	if len(u.how) < 3 {
		u.how = append(u.how, how)
	}
}

// valuesVariant is one set of values the chart is rendered with.
type valuesVariant struct {
	how    string
	values map[string]any
}

// valueVariants are the chart's defaults, then each boolean "enabled" value switched on.
func valueVariants(ch *chart.Chart) []valuesVariant {
	variants := []valuesVariant{{"defaults", map[string]any{}}}
	for _, p := range enabledPaths(ch.Values, "") {
		v := map[string]any{}
		if err := setPath(v, p, true); err == nil {
			variants = append(variants, valuesVariant{p + "=true", v})
		}
	}
	return variants
}

func bufferedFiles(ch *chart.Chart) []*loader.BufferedFile {
	var out []*loader.BufferedFile
	for _, f := range ch.Raw {
		out = append(out, &loader.BufferedFile{Name: f.Name, Data: f.Data})
	}
	return out
}

func splitObjects(manifest string) []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	for _, doc := range strings.Split(manifest, "\n---") {
		var m map[string]any
		if err := yaml.Unmarshal([]byte(doc), &m); err != nil || len(m) == 0 {
			continue
		}
		u := &unstructured.Unstructured{Object: m}
		if u.GetKind() != "" {
			out = append(out, u)
		}
	}
	return out
}

// enabledPaths lists the dotted paths of every boolean "enabled" value.
func enabledPaths(values map[string]any, prefix string) []string {
	var out []string
	for k, v := range values {
		p := k
		if prefix != "" {
			p = prefix + "." + k
		}
		switch x := v.(type) {
		case bool:
			if k == "enabled" {
				out = append(out, p)
			}
		case map[string]any:
			out = append(out, enabledPaths(x, p)...)
		}
	}
	sort.Strings(out)
	return out
}

func setPath(m map[string]any, path string, v any) error {
	return unstructured.SetNestedField(m, v, strings.Split(path, ".")...)
}

// scaffoldRole is the kind's ClusterRole, aggregated into rudder's: the CR kind, its status
// and finalizers, and every kind the chart renders with the verbs rudder needs to install,
// watch and restore it.
func scaffoldRole(gvk schema.GroupVersionKind, plural string, found []kindUse) *rbacv1.ClusterRole {
	rules := []rbacv1.PolicyRule{
		{APIGroups: []string{gvk.Group}, Resources: []string{plural}, Verbs: []string{"get", "list", "watch", "update", "patch"}},
		{APIGroups: []string{gvk.Group}, Resources: []string{plural + "/status"}, Verbs: []string{"get", "update", "patch"}},
		{APIGroups: []string{gvk.Group}, Resources: []string{plural + "/finalizers"}, Verbs: []string{"update"}},
	}
	byGroup := map[string][]string{}
	for _, k := range found {
		byGroup[k.gvk.Group] = append(byGroup[k.gvk.Group], k.resource)
	}
	groups := make([]string, 0, len(byGroup))
	for g := range byGroup {
		groups = append(groups, g)
	}
	sort.Strings(groups)
	for _, g := range groups {
		res := byGroup[g]
		sort.Strings(res)
		rules = append(rules, rbacv1.PolicyRule{APIGroups: []string{g}, Resources: res,
			Verbs: []string{"get", "list", "watch", "create", "update", "patch", "delete"}})
	}
	return &rbacv1.ClusterRole{
		TypeMeta: metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRole"},
		ObjectMeta: metav1.ObjectMeta{Name: "rudder-" + plural + "." + gvk.Group,
			Labels: map[string]string{AggregateLabel: "true"}},
		Rules: rules,
	}
}
