package watches

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

const dependsOnWatches = `
- {group: db.io, version: v1, kind: Database, chart: db}
- {group: other.io, version: v1, kind: Database, chart: db}
- {group: cache.io, version: v1, kind: Cache, chart: cache}
- group: app.io
  version: v1
  kind: App
  chart: app
  dependsOn:
    kinds:
    - {kind: Database.db.io}
    - {kind: Cache, readyExpr: "status.phase == 'Up'"}
    allowNamespaces: [shared]
    defaults: ["Database.db.io/{{ .metadata.name }}-db"]
`

func loadDependsOn(t *testing.T, text string) ([]*Watch, error) {
	t.Helper()
	return Parse([]byte(text), "/base", func(string) (string, bool) { return "", false })
}

func cr(w *Watch, ns, name string, annotations map[string]string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{}}
	u.SetGroupVersionKind(w.GroupVersionKind())
	u.SetNamespace(ns)
	u.SetName(name)
	u.SetAnnotations(annotations)
	return u
}

func TestDependenciesOf(t *testing.T) {
	t.Parallel()
	ws, err := loadDependsOn(t, dependsOnWatches)
	if err != nil {
		t.Fatal(err)
	}
	app := ws[3]
	if got := len(app.Ordering().Kinds()); got != 2 {
		t.Fatalf("%d dependency kinds, want 2", got)
	}
	// The default, then the annotation's entries, each once; Cache is unique, so bare.
	deps, err := app.Ordering().Of(cr(app, "team", "shop", map[string]string{
		AnnotationDependsOn: "Cache/sessions, Database.db.io/shared/main, Database.db.io/shop-db"}))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, d := range deps {
		got = append(got, d.String())
	}
	if want := "Database/team/shop-db Cache/team/sessions Database/shared/main"; strings.Join(got, " ") != want {
		t.Fatalf("dependencies %q, want %q", got, want)
	}
	// In the annotation too, a bare Kind names the one listed kind of that name.
	if d, err := app.Ordering().Of(cr(app, "team", "shop", map[string]string{AnnotationDependsOn: "Database/x"})); err != nil ||
		len(d) != 2 || d[1].GVK.Group != "db.io" {
		t.Fatalf("Database/x: %v, %v", d, err)
	}
	if deps[0].IndexValue() != "Database.db.io/team/shop-db" {
		t.Fatalf("index value %q", deps[0].IndexValue())
	}
	for ann, want := range map[string]string{
		"Queue/x": "Queue is not a kind this kind's CRs may depend on " +
			"(the watch's dependsOn.kinds: Database.db.io, Cache.cache.io)",
		"shop":                       "not Kind/name or Kind/namespace/name",
		"App/shop":                   "App is not a kind",
		"Database.other.io/x":        "Database.other.io is not a kind",
		"Cache/elsewhere/x":          "namespace elsewhere: a CR depends only on CRs of its own namespace",
		"Cache/x/y/z":                "not Kind/name or Kind/namespace/name",
		"Cache/Not_A_Name":           `name "Not_A_Name"`,
		"Cache/ok, Deployment/other": "annotation rudder.dev/depends-on, entry 2",
	} {
		_, err := app.Ordering().Of(cr(app, "team", "shop", map[string]string{AnnotationDependsOn: ann}))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: error %v, want one naming %q", ann, err, want)
		}
	}
	// A kind without dependsOn has none: a CR that names some is told so.
	db := ws[0]
	if deps, err := db.Ordering().Of(cr(db, "team", "d", nil)); err != nil || deps != nil {
		t.Fatalf("a kind without dependsOn: %v, %v", deps, err)
	}
	if _, err := db.Ordering().Of(cr(db, "team", "d", map[string]string{AnnotationDependsOn: "App/x"})); err == nil ||
		!strings.Contains(err.Error(), "has no dependsOn") {
		t.Fatalf("a kind without dependsOn, a CR naming a dependency: %v", err)
	}
	if app.Ordering().MayDependIn("elsewhere") || !app.Ordering().MayDependIn("shared") {
		t.Fatal("MayDependIn does not follow allowNamespaces")
	}
}

func TestDependsOnRefusedAtLoad(t *testing.T) {
	t.Parallel()
	base := "- {group: db.io, version: v1, kind: Database, chart: db}\n- {group: other.io, version: v1, kind: Database, chart: db}\n"
	for body, want := range map[string]string{
		"dependsOn: {}":                                                           "dependsOn.kinds: required",
		"dependsOn: {kinds: [{kind: Queue}]}":                                     `dependsOn.kinds[0].kind: "Queue" is not a kind of this watches file`,
		"dependsOn: {kinds: [{kind: Database}]}":                                  "names 2 watched kinds: name it as Kind.group",
		"dependsOn: {kinds: [{kind: Database.db.io, readyExpr: 'status.'}]}":      "readyExpr",
		"dependsOn: {kinds: [{kind: Database.db.io}], allowNamespaces: [Bad_NS]}": "dependsOn.allowNamespaces",
		"dependsOn: {kinds: [{kind: Database.db.io}], defaults: ['{{ .x']}":       "dependsOn.defaults[0]",
	} {
		_, err := loadDependsOn(t, base+"- {group: app.io, version: v1, kind: App, chart: app, "+body+"}\n")
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: error %v, want one naming %q", body, err, want)
		}
	}
}

func TestDependencyReady(t *testing.T) {
	t.Parallel()
	ws, err := loadDependsOn(t, dependsOnWatches)
	if err != nil {
		t.Fatal(err)
	}
	app := ws[3]
	db := func(gen int64, status map[string]any) *unstructured.Unstructured {
		u := cr(ws[0], "team", "d", nil)
		u.SetGeneration(gen)
		if status != nil {
			u.Object["status"] = status
		}
		return u
	}
	ready := func(status string, gen int64) map[string]any {
		return map[string]any{"observedGeneration": gen, "conditions": []any{map[string]any{"type": "Ready", "status": status,
			"reason": "ObjectsReady", "message": "m", "observedGeneration": gen, "lastTransitionTime": "2026-12-07T10:00:00Z"}}}
	}
	for _, tc := range []struct {
		name string
		obj  *unstructured.Unstructured
		ok   bool
		why  string
	}{
		{"no status", db(1, nil), false, "no Ready condition yet"},
		{"ready", db(2, ready("True", 2)), true, ""},
		{"ready on an older generation", db(3, ready("True", 2)), false, "generation 3 is not reconciled yet"},
		{"not ready", db(2, ready("False", 2)), false, "Ready=False, ObjectsReady: m"},
	} {
		if ok, why := app.Ordering().Ready(tc.obj); ok != tc.ok || !strings.Contains(why, tc.why) {
			t.Errorf("%s: %v %q, want %v %q", tc.name, ok, why, tc.ok, tc.why)
		}
	}
	// A kind with a readyExpr is judged by it (on the generation its status observed).
	cache := func(phase string) *unstructured.Unstructured {
		u := cr(ws[2], "team", "c", nil)
		u.SetGeneration(1)
		u.Object["status"] = map[string]any{"phase": phase, "observedGeneration": int64(1)}
		return u
	}
	if ok, why := app.Ordering().Ready(cache("Up")); !ok {
		t.Errorf("Cache Up: not ready: %s", why)
	}
	if ok, why := app.Ordering().Ready(cache("Starting")); ok || !strings.Contains(why, "readyExpr") {
		t.Errorf("Cache Starting: %v %q", ok, why)
	}
}
