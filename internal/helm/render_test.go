package helm

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"

	"helm.sh/helm/v4/pkg/action"
	"helm.sh/helm/v4/pkg/chart/common"
	chart "helm.sh/helm/v4/pkg/chart/v2"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	release "helm.sh/helm/v4/pkg/release/v1"
	releaseutil "helm.sh/helm/v4/pkg/release/v1/util"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/rudder-operator/rudder/internal/guard"
	"github.com/rudder-operator/rudder/internal/records"
	"github.com/rudder-operator/rudder/internal/render"
)

// helmRender is what Helm itself renders (client-only install, in process): the baseline the
// out-of-process render must match.
func helmRender(t *testing.T, ch *chart.Chart, values map[string]any) *release.Release {
	t.Helper()
	in := action.NewInstall(action.NewConfiguration())
	in.DryRunStrategy, in.Replace = action.DryRunClient, true
	in.ReleaseName, in.Namespace = "fidelity", "ns"
	in.KubeVersion = &testCaps().KubeVersion
	rel, err := records.V1Of(in.Run(ch, values))
	if err != nil {
		t.Fatal(err)
	}
	return rel
}

// file is a chart file.
func file(name, data string) *common.File { return &common.File{Name: name, Data: []byte(data)} }

// fidelityChart exercises what Helm does around the render: a subchart under two aliases, one
// disabled by a condition, import-values, a library chart, crds/ in a subchart, hooks (one in a
// file with a manifest), NOTES and output holding template delimiters.
func fidelityChart() *chart.Chart {
	lib := &chart.Chart{Metadata: &chart.Metadata{APIVersion: "v2", Name: "lib", Version: "1.0.0", Type: "library"},
		Templates: []*common.File{file("templates/_names.tpl", `{{- define "lib.name" -}}{{ .Release.Name }}-{{ .Chart.Name }}{{- end -}}`)}}
	sub := func() *chart.Chart {
		return &chart.Chart{Metadata: &chart.Metadata{APIVersion: "v2", Name: "sub", Version: "1.0.0"},
			Values:    map[string]any{"port": float64(80), "exported": map[string]any{"color": "blue"}},
			Templates: []*common.File{file("templates/svc.yaml", "apiVersion: v1\nkind: Service\nmetadata:\n  name: {{ .Release.Name }}-{{ .Chart.Name }}\nspec:\n  ports: [{port: {{ .Values.port }}}]\n")},
			Files:     []*common.File{file("crds/thing.yaml", "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata: {name: things.example.com}\n")}}
	}
	top := &chart.Chart{Metadata: &chart.Metadata{APIVersion: "v2", Name: "top", Version: "0.1.0", Dependencies: []*chart.Dependency{
		{Name: "lib", Version: "1.0.0"},
		{Name: "sub", Version: "1.0.0", Alias: "front", ImportValues: []any{map[string]any{"child": "exported", "parent": "imported"}}},
		{Name: "sub", Version: "1.0.0", Alias: "back", Condition: "back.enabled"},
		{Name: "sub", Version: "1.0.0", Alias: "off", Condition: "off.enabled"},
	}},
		Values: map[string]any{"front": map[string]any{"port": float64(8080)}, "back": map[string]any{"enabled": true}, "off": map[string]any{"enabled": false}},
		Templates: []*common.File{
			file("templates/cm.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ include \"lib.name\" . }}\ndata:\n  color: {{ .Values.imported.color | default \"none\" }}\n  tmpl: '{{ \"{{ .Values.x }}\" }} }} {{ \"{{{\" }}'\n  revision: {{ .Release.Revision | quote }}\n  kube: {{ .Capabilities.KubeVersion.Version | quote }}\n"),
			file("templates/hook.yaml", "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {{ .Release.Name }}-hook\n  annotations: {helm.sh/hook: pre-install}\nspec: {containers: [{name: c, image: busybox}]}\n"),
			file("templates/mixed.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}-pre\n  annotations: {helm.sh/hook: pre-install}\n---\napiVersion: v1\nkind: Secret\nmetadata:\n  name: {{ .Release.Name }}-s\nstringData: {k: v}\n"),
			file("templates/_helpers.tpl", `{{ define "unused" }}x{{ end }}`),
			file("templates/NOTES.txt", "Installed {{ .Release.Name }} {{ \"{{\" }}literal{{ \"}}\" }}"),
			file("templates/empty.yaml", "{{- if false }}x{{ end }}"),
		}}
	top.AddDependency(lib)
	for range 3 {
		top.AddDependency(sub())
	}
	return top
}

// TestRenderMatchesHelm: the out-of-process render gives Helm's action exactly what Helm
// would have rendered in process: manifest, hooks, NOTES and CRDs, for a chart exercising
// dependencies and for the repository's and public charts.
func TestRenderMatchesHelm(t *testing.T) {
	charts := map[string]func() (*chart.Chart, error){"fidelity": func() (*chart.Chart, error) { return fidelityChart(), nil }}
	for _, dir := range []string{"../../charts/nginx", "../../charts/at", "../../charts/application", "../../config/testdata/public/ingress-nginx"} {
		if _, err := os.Stat(dir); err == nil {
			charts[filepath.Base(dir)] = func() (*chart.Chart, error) { return loader.Load(dir) }
		}
	}
	for name, load := range charts {
		t.Run(name, func(t *testing.T) {
			want, err := load()
			if err != nil {
				t.Fatal(err)
			}
			got, err := load()
			if err != nil {
				t.Fatal(err)
			}
			values := map[string]any{"extra": int64(3)}
			base := helmRender(t, want, values)
			// What the render makes is not under test here: a confinement that allows it all.
			req := &Request{Scope: Scope{Confinement: guard.Measuring(guard.Confinement{Namespace: "ns", AllowClusterScoped: ClusterScopedKinds()})},
				ReleaseName: "fidelity", Chart: got, Values: values}
			pool := testPool(t)
			rendered, err := renderChart(t.Context(), pool, StaticMapper(), req, common.ReleaseOptions{Name: "fidelity", Namespace: "ns", Revision: 1, IsInstall: true},
				testCaps(), nil, nil, nil, nil)
			if err != nil {
				t.Fatal(err)
			}
			out := helmRender(t, rendered, values)
			if out.Manifest != base.Manifest {
				t.Errorf("manifest differs:\n--- helm\n%s\n--- rudder\n%s", base.Manifest, out.Manifest)
			}
			if out.Info.Notes != base.Info.Notes {
				t.Errorf("notes: %q, helm's %q", out.Info.Notes, base.Info.Notes)
			}
			if !reflect.DeepEqual(hookTexts(out.Hooks), hookTexts(base.Hooks)) {
				t.Errorf("hooks differ:\n%v\n%v", hookTexts(out.Hooks), hookTexts(base.Hooks))
			}
			if got, want := crdTexts(rendered), crdTexts(want); !reflect.DeepEqual(got, want) {
				t.Errorf("CRDs %q, helm's %q", got, want)
			}
			if !reflect.DeepEqual(got.Values, want.Values) {
				t.Errorf("the record's chart values %v, helm's %v", got.Values, want.Values)
			}
		})
	}
}

// TestPostRenderBeforeTheAction: the chart renderChart gives Helm's action, post-rendered by
// rudder, makes the release Helm's own post-render of the manifest alone (its "nohooks"
// strategy, Helm 3's way) makes: the same objects under the same "# Source" lines in the same
// order, and the same hooks, untouched; and the post-renderer knows the objects by the text
// Helm stores, document by document.
func TestPostRenderBeforeTheAction(t *testing.T) {
	owner := guard.Owner{GVK: schema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "Widget"}, Key: types.NamespacedName{Namespace: "ns", Name: "w"}, UID: "u-1"}
	req := &Request{Scope: Scope{Owner: owner, Confinement: guard.Measuring(guard.Confinement{Namespace: "ns", AllowClusterScoped: ClusterScopedKinds()})},
		ReleaseName: "fidelity", Chart: fidelityChart(), Values: map[string]any{}}
	in := action.NewInstall(action.NewConfiguration())
	in.DryRunStrategy, in.Replace = action.DryRunClient, true
	in.ReleaseName, in.Namespace = "fidelity", "ns"
	in.KubeVersion = &testCaps().KubeVersion
	in.PostRenderer, in.PostRenderStrategy = req.postRenderer(StaticMapper()), action.PostRenderStrategyNoHooks
	base, err := records.V1Of(in.Run(fidelityChart(), req.Values))
	if err != nil {
		t.Fatal(err)
	}
	post := req.postRenderer(StaticMapper())
	rendered, err := renderChart(t.Context(), testPool(t), StaticMapper(), req, common.ReleaseOptions{Name: "fidelity", Namespace: "ns", Revision: 1, IsInstall: true},
		testCaps(), nil, nil, nil, post)
	if err != nil {
		t.Fatal(err)
	}
	out := helmRender(t, rendered, req.Values)
	got, want := sourcedObjects(t, out.Manifest), sourcedObjects(t, base.Manifest)
	if len(want) != 4 || !reflect.DeepEqual(got, want) {
		t.Errorf("manifest's objects:\n%v\nHelm's post-render:\n%v", got, want)
	}
	if !reflect.DeepEqual(hookTexts(out.Hooks), hookTexts(base.Hooks)) {
		t.Errorf("hooks differ:\n%v\n%v", hookTexts(out.Hooks), hookTexts(base.Hooks))
	}
	for _, d := range releaseutil.SplitManifests(out.Manifest) {
		_, text, _ := strings.Cut(d, "\n") // the "# Source" line
		if post.written[strings.TrimSpace(text)] == nil {
			t.Errorf("the post-renderer does not know the document Helm stores:\n%s", d)
		}
	}
	if len(post.written) != len(want) || len(post.made()) != len(want) {
		t.Errorf("the post-renderer wrote %d documents, %d identities; the manifest has %d", len(post.written), len(post.made()), len(want))
	}
}

// sourcedObjects are a manifest's documents as their "# Source" line and object, in order.
func sourcedObjects(t *testing.T, manifest string) []string {
	t.Helper()
	var out []string
	docs := releaseutil.SplitManifests(manifest)
	keys := slices.Collect(maps.Keys(docs))
	sort.Sort(releaseutil.BySplitManifestsOrder(keys))
	for _, k := range keys {
		source, text, _ := strings.Cut(docs[k], "\n")
		var obj map[string]any
		if err := sigsyaml.Unmarshal([]byte(text), &obj); err != nil {
			t.Fatal(err)
		}
		out = append(out, fmt.Sprintf("%s %v", source, obj))
	}
	return out
}

func hookTexts(hs []*release.Hook) []string {
	var out []string
	for _, h := range hs {
		out = append(out, h.Path+"\n"+h.Manifest)
	}
	return out
}

func testPool(t *testing.T) *render.Pool {
	t.Helper()
	p, err := render.Default()
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func testCaps() *common.Capabilities {
	c := common.DefaultCapabilities.Copy()
	c.KubeVersion = common.KubeVersion{Version: "v1.37.2", Major: "1", Minor: "37"}
	return c
}

func crdTexts(ch *chart.Chart) []string {
	var out []string
	for _, c := range ch.CRDObjects() {
		out = append(out, string(c.File.Data))
	}
	return out
}
