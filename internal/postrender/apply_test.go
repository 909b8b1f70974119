package postrender

import (
	"strings"
	"testing"

	releaseutil "helm.sh/helm/v4/pkg/release/v1/util"
	"sigs.k8s.io/yaml"
)

const deployment = `# a comment Helm keeps
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  labels:
    team: chart
spec:
  replicas: 2
  template:
    spec:
      containers:
        - name: web
          image: grafana/grafana:12.0.0
`

const hookJob = `apiVersion: batch/v1
kind: Job
metadata:
  name: migrate
  annotations:
    helm.sh/hook: pre-install
spec:
  template:
    spec:
      containers:
        - name: migrate
          image: grafana/grafana:12.0.0
`

func files() map[string]string {
	return map[string]string{
		"c/templates/deploy.yaml": deployment + "---\n" + `apiVersion: v1
kind: ConfigMap
metadata:
  name: cm
data:
  big: "12345678901234567890"
`,
		"c/templates/hook.yaml":  hookJob,
		"c/templates/empty.yaml": "\n# nothing\n",
		"c/templates/NOTES.txt":  "hello {{ not yaml",
	}
}

const toleration = `apiVersion: apps/v1
kind: Deployment
metadata:
  name: any
spec:
  template:
    spec:
      tolerations:
        - key: dedicated
          operator: Exists
`

func object(t *testing.T, text, kind string) map[string]any {
	t.Helper()
	for _, d := range strings.Split(text, "\n---\n") {
		var m map[string]any
		if err := yaml.Unmarshal([]byte(d), &m); err != nil {
			t.Fatalf("output does not parse: %v\n%s", err, d)
		}
		if m["kind"] == kind {
			return m
		}
	}
	t.Fatalf("no %s in\n%s", kind, text)
	return nil
}

func image(m map[string]any) string {
	c := m["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)["containers"].([]any)[0]
	return c.(map[string]any)["image"].(string)
}

func TestApply(t *testing.T) {
	mirror := []Image{{Name: "grafana/grafana", NewName: "mirror.example.com/grafana/grafana"}}
	spec := &Spec{
		PostRenderers: []PostRenderer{
			{Kustomize: &Kustomize{Patches: []Patch{{Patch: toleration, Target: &Selector{Kind: "Deployment"}}}}},
			{Kustomize: &Kustomize{Images: mirror}, Hooks: new(false)},
		},
		CommonMetadata: &Metadata{Labels: map[string]string{"team": "platform", "backup": "true"}, Annotations: map[string]string{"cost-centre": "42"}},
	}
	out, err := spec.Apply(files(), releaseutil.SplitManifests)
	if err != nil {
		t.Fatal(err)
	}
	if out["c/templates/NOTES.txt"] != "hello {{ not yaml" {
		t.Errorf("NOTES.txt changed: %q", out["c/templates/NOTES.txt"])
	}
	d := object(t, out["c/templates/deploy.yaml"], "Deployment")
	if got := image(d); got != "mirror.example.com/grafana/grafana:12.0.0" {
		t.Errorf("the Deployment's image is %q, want the mirror's", got)
	}
	tol := d["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)["tolerations"]
	if tol == nil {
		t.Errorf("the patch's toleration is missing: %v", d)
	}
	md := d["metadata"].(map[string]any)
	if !strings.Contains(out["c/templates/deploy.yaml"], "team: platform\n") {
		t.Errorf("a label is quoted where YAML needs no quotes:\n%s", out["c/templates/deploy.yaml"])
	}
	if md["labels"].(map[string]any)["backup"] != "true" {
		t.Errorf("a label that reads as a bool in YAML is not a string: %#v", md["labels"])
	}
	if md["labels"].(map[string]any)["team"] != "platform" || md["annotations"].(map[string]any)["cost-centre"] != "42" {
		t.Errorf("common metadata missing or not winning over the chart's: %v", md)
	}
	if _, ok := md["annotations"].(map[string]any)[originKey]; ok {
		t.Errorf("the origin annotation is left on the object: %v", md)
	}
	cm := object(t, out["c/templates/deploy.yaml"], "ConfigMap")
	if cm["data"].(map[string]any)["big"] != "12345678901234567890" {
		t.Errorf("a string value changed: %v", cm["data"])
	}
	j := object(t, out["c/templates/hook.yaml"], "Job")
	if got := image(j); got != "grafana/grafana:12.0.0" {
		t.Errorf("the hook's image is %q: the post-renderer says hooks: false", got)
	}
	if j["metadata"].(map[string]any)["labels"].(map[string]any)["team"] != "platform" {
		t.Errorf("common metadata did not reach the hook: %v", j["metadata"])
	}
	if !strings.Contains(out["c/templates/empty.yaml"], "# nothing") {
		t.Errorf("a document without an object changed: %q", out["c/templates/empty.yaml"])
	}
}

func TestApplyHooksByDefault(t *testing.T) {
	spec := &Spec{PostRenderers: []PostRenderer{{Kustomize: &Kustomize{Images: []Image{{Name: "grafana/grafana", NewTag: "12.1.0"}}}}}}
	out, err := spec.Apply(files(), releaseutil.SplitManifests)
	if err != nil {
		t.Fatal(err)
	}
	if got := image(object(t, out["c/templates/hook.yaml"], "Job")); got != "grafana/grafana:12.1.0" {
		t.Errorf("the hook's image is %q: post-renderers apply to hooks by default", got)
	}
}

func TestApplyEmptyChangesNothing(t *testing.T) {
	in := files()
	out, err := (&Spec{}).Apply(in, releaseutil.SplitManifests)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range in {
		if out[k] != v {
			t.Errorf("%s changed with an empty spec", k)
		}
	}
}

func TestApplyDeletes(t *testing.T) {
	del := "$patch: delete\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm\n"
	out, err := (&Spec{PostRenderers: []PostRenderer{{Kustomize: &Kustomize{Patches: []Patch{{Patch: del}}}}}}).Apply(files(), releaseutil.SplitManifests)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(out["c/templates/deploy.yaml"], "ConfigMap") {
		t.Errorf("the deleted ConfigMap is still there:\n%s", out["c/templates/deploy.yaml"])
	}
	object(t, out["c/templates/deploy.yaml"], "Deployment")
}

func TestApplyNamesTheFailingPatch(t *testing.T) {
	good := Patch{Patch: toleration, Target: &Selector{Kind: "Deployment"}}
	bad := Patch{Patch: `[{"op": "replace", "path": "/spec/missing/field", "value": 1}]`, Target: &Selector{Kind: "Deployment", Name: "web"}}
	_, err := (&Spec{PostRenderers: []PostRenderer{{Kustomize: &Kustomize{Patches: []Patch{good, bad}}}}}).Apply(files(), releaseutil.SplitManifests)
	if err == nil {
		t.Fatal("a JSON 6902 patch of a missing path applied")
	}
	if want := "postRenderers[0].kustomize.patches[1] (target Deployment/web)"; !strings.Contains(err.Error(), want) {
		t.Errorf("the error %q does not name %q", err, want)
	}
}

func TestCheck(t *testing.T) {
	for _, tc := range []struct {
		name string
		spec Spec
		want string // in the error; "" for none
	}{
		{"valid", Spec{PostRenderers: []PostRenderer{{Kustomize: &Kustomize{Patches: []Patch{{Patch: toleration}}}}},
			CommonMetadata: &Metadata{Labels: map[string]string{"team": "a"}}}, ""},
		{"no kustomize", Spec{PostRenderers: []PostRenderer{{}}}, "postRenderers[0]: kustomize is required"},
		{"empty patch", Spec{PostRenderers: []PostRenderer{{Kustomize: &Kustomize{Patches: []Patch{{}}}}}}, "patches[0].patch: is required"},
		{"bad selector", Spec{PostRenderers: []PostRenderer{{Kustomize: &Kustomize{Patches: []Patch{{Patch: toleration,
			Target: &Selector{LabelSelector: "a in (b"}}}}}}}, "patches[0].target.labelSelector"},
		{"image without name", Spec{PostRenderers: []PostRenderer{{Kustomize: &Kustomize{Images: []Image{{NewTag: "x"}}}}}}, "images[0].name: is required"},
		{"rudder's mark", Spec{CommonMetadata: &Metadata{Annotations: map[string]string{"rudder.dev/owner": "x"}}}, "rudder's or Helm's own marks"},
		{"a hook annotation", Spec{CommonMetadata: &Metadata{Annotations: map[string]string{"helm.sh/hook": "test"}}}, "rudder's or Helm's own marks"},
		{"bad label value", Spec{CommonMetadata: &Metadata{Labels: map[string]string{"team": "a b"}}}, "commonMetadata.labels[team]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.spec.Check()
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("unexpected error: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("error %v, want one with %q", err, tc.want)
			}
		})
	}
}

func TestDigest(t *testing.T) {
	a := &Spec{CommonMetadata: &Metadata{Labels: map[string]string{"a": "1", "b": "2"}}}
	b := &Spec{CommonMetadata: &Metadata{Labels: map[string]string{"b": "2", "a": "1"}}}
	c := &Spec{CommonMetadata: &Metadata{Labels: map[string]string{"a": "1", "b": "3"}}}
	if a.Digest() != b.Digest() || a.Digest() == c.Digest() || (&Spec{}).Digest() != "" {
		t.Errorf("digests: %q %q %q %q", a.Digest(), b.Digest(), c.Digest(), (&Spec{}).Digest())
	}
}
