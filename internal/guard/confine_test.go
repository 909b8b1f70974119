package guard

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"helm.sh/helm/v4/pkg/chart/common"
	commonutil "helm.sh/helm/v4/pkg/chart/common/util"
	chart "helm.sh/helm/v4/pkg/chart/v2"
	"helm.sh/helm/v4/pkg/engine"
	"k8s.io/client-go/rest"

	"github.com/rudder-operator/rudder/internal/guard/guardtest"
	"github.com/rudder-operator/rudder/internal/release"
)

func confinement(allowedNS []string, clusterKinds ...string) Confinement {
	return Confinement{Namespace: "tenant", AllowedNamespaces: allowedNS, AllowClusterScoped: clusterKinds}
}

const widgetCRD = `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: widgets.example.com}
spec:
  group: example.com
  scope: Namespaced
  names: {kind: Widget, plural: widgets}
`

func checkViolation(t *testing.T, err error, want string) {
	t.Helper()
	var ce *ConfinementError
	switch {
	case want == "" && err != nil:
		t.Fatalf("unexpected error: %v", err)
	case want != "" && !errors.As(err, &ce):
		t.Fatalf("want a ConfinementError containing %q, got %v", want, err)
	case want != "" && !strings.Contains(err.Error(), want):
		t.Fatalf("violation %q does not contain %q", err, want)
	}
}

func TestHookConfinement(t *testing.T) {
	hook := func(ns string, events ...string) *release.Hook {
		m := "apiVersion: v1\nkind: Pod\nmetadata:\n  name: h\n"
		if ns != "" {
			m += "  namespace: " + ns + "\n"
		}
		return &release.Hook{Name: "h", Kind: "Pod", Manifest: m, Events: events}
	}
	tests := []struct {
		name string
		rel  *release.Release
		// manifest: check the manifest too (as rollback and uninstall do).
		manifest bool
		want     string
	}{
		{"hook in own namespace", &release.Release{Hooks: []*release.Hook{hook("", "pre-install")}}, false, ""},
		{"pre-install hook elsewhere", &release.Release{Hooks: []*release.Hook{hook("kube-system", "pre-install")}}, false,
			`hook (pre-install) Pod "h" in namespace "kube-system"`},
		{"every event is checked", &release.Release{Hooks: []*release.Hook{hook("victim", "post-delete", "test")}}, false,
			`hook (post-delete,test) Pod "h" in namespace "victim"`},
		{"manifest unchecked unless asked", &release.Release{Manifest: "apiVersion: v1\nkind: Pod\nmetadata: {name: m, namespace: victim}\n"}, false, ""},
		{"manifest checked when asked", &release.Release{Manifest: "apiVersion: v1\nkind: Pod\nmetadata: {name: m, namespace: victim}\n"}, true,
			`manifest Pod "m" in namespace "victim"`},
		{"kind of the chart's own CRD", &release.Release{Hooks: []*release.Hook{{Name: "w", Events: []string{"post-install"},
			Manifest: "apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: w, namespace: victim}\n"}}}, false,
			`hook (post-install) Widget "w" in namespace "victim"`},
	}
	ch := []CRDFile{{Name: "crds/widget.yaml", Data: []byte(widgetCRD)}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			checkViolation(t, confinement(nil).CheckRelease(guardtest.Mapper(), tt.rel, ch, tt.manifest), tt.want)
		})
	}
}

func TestCRDConfinement(t *testing.T) {
	ch := []CRDFile{{Name: "crds/widget.yaml", Data: []byte(widgetCRD)}}
	checkViolation(t, confinement(nil).CheckCRDs(guardtest.Mapper(), ch),
		`CRD (crds/) CustomResourceDefinition "widgets.example.com": cluster-scoped, and the watch's allowClusterScoped does not name CustomResourceDefinition`)
	checkViolation(t, confinement(nil, "CustomResourceDefinition").CheckCRDs(guardtest.Mapper(), ch), "")
	checkViolation(t, confinement(nil, "ClusterRole").CheckCRDs(guardtest.Mapper(), ch), "CustomResourceDefinition")
}

func TestRequestConfinement(t *testing.T) {
	tests := []struct {
		method, path string
		conf         Confinement
		want         string
	}{
		{"GET", "/api", confinement(nil), ""},
		{"GET", "/apis/apps/v1", confinement(nil), ""},
		{"GET", "/version", confinement(nil), ""},
		{"GET", "/api/v1/namespaces/tenant/secrets/s", confinement(nil), ""},
		{"POST", "/api/v1/namespaces/tenant/configmaps", confinement(nil), ""},
		{"GET", "/api/v1/namespaces/victim/secrets/s", confinement(nil), `request get Secret "s" in namespace "victim"`},
		{"GET", "/api/v1/namespaces/shared/secrets/s", confinement([]string{"shared"}), ""},
		{"DELETE", "/api/v1/namespaces/victim/pods/p", confinement(nil), `request delete Pod "p" in namespace "victim"`},
		{"GET", "/api/v1/secrets", confinement(nil), "request list Secret: across all namespaces"},
		{"GET", "/api/v1/secrets", confinement([]string{"*"}), ""},
		{"GET", "/api/v1/namespaces/tenant", confinement(nil), ""},
		{"GET", "/api/v1/namespaces/victim", confinement(nil), `request get Namespace "victim"`},
		{"GET", "/api/v1/namespaces", confinement(nil), "request list Namespace"},
		{"DELETE", "/api/v1/namespaces/tenant", confinement(nil), `request delete Namespace "tenant"`},
		{"POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", confinement(nil), "request create CustomResourceDefinition"},
		{"POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", confinement(nil, "CustomResourceDefinition"), ""},
		{"GET", "/apis/rbac.authorization.k8s.io/v1/clusterroles/admin", confinement(nil), `request get ClusterRole "admin"`},
	}
	for _, tt := range tests {
		t.Run(tt.method+" "+tt.path, func(t *testing.T) {
			g := &Guard{conf: tt.conf, mapper: guardtest.Mapper()}
			req := httptest.NewRequest(tt.method, "https://api.example"+tt.path, nil)
			v, _ := g.decide(req)
			switch {
			case tt.want == "" && v != nil:
				t.Fatalf("refused: %s", v)
			case tt.want != "" && v == nil:
				t.Fatalf("allowed; want a refusal containing %q", tt.want)
			case tt.want != "" && !strings.Contains(v.String(), tt.want):
				t.Fatalf("refusal %q does not contain %q", v, tt.want)
			}
		})
	}
}

// TestLookupConfined renders a template whose lookup reads another namespace through Helm's
// own engine and a guarded configuration: the render fails naming the namespace and kind, and
// the refused request never reaches the server; a lookup of the own namespace does.
func TestLookupConfined(t *testing.T) {
	var mu sync.Mutex
	var seen []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.Method+" "+r.URL.Path)
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		switch r.URL.Path {
		case "/api/v1":
			_, _ = w.Write([]byte(`{"kind":"APIResourceList","groupVersion":"v1","resources":[{"name":"secrets","namespaced":true,"kind":"Secret","verbs":["get","list"]}]}`))
		case "/api/v1/namespaces/tenant/secrets/s":
			_, _ = w.Write([]byte(`{"apiVersion":"v1","kind":"Secret","metadata":{"name":"s","namespace":"tenant"},"data":{"k":"dg=="}}`))
		default:
			w.WriteHeader(http.StatusNotFound)
			_, _ = w.Write([]byte(`{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"NotFound","code":404}`))
		}
	}))
	defer srv.Close()

	render := func(ns string) (map[string]string, *Guard, error) {
		g := &Guard{conf: confinement(nil), mapper: guardtest.Mapper()}
		cfg := &rest.Config{Host: srv.URL}
		cfg.Wrap(g.Wrap)
		ch := &chart.Chart{Metadata: &chart.Metadata{Name: "c", Version: "0.1.0", APIVersion: "v2"}, Templates: []*common.File{{
			Name: "templates/cm.yaml",
			Data: []byte(`data: {{ (lookup "v1" "Secret" .Values.ns "s").data | toJson | quote }}`),
		}}}
		vals, err := commonutil.ToRenderValues(ch, map[string]any{"ns": ns}, common.ReleaseOptions{Name: "r", Namespace: "tenant"}, nil)
		if err != nil {
			t.Fatal(err)
		}
		out, err := engine.New(cfg).RenderWithContext(context.Background(), ch, vals)
		return out, g, err
	}

	out, _, err := render("tenant")
	if err != nil {
		t.Fatalf("lookup of the own namespace: %v", err)
	}
	if got := out["c/templates/cm.yaml"]; !strings.Contains(got, `dg==`) {
		t.Fatalf("lookup of the own namespace read nothing: %q", got)
	}

	mu.Lock()
	seen = nil
	mu.Unlock()
	_, g, err := render("victim")
	if err == nil || !strings.Contains(err.Error(), `Secret "s" in namespace "victim"`) {
		t.Fatalf("lookup of another namespace: want a render error naming it, got %v", err)
	}
	if refused, _ := g.Outcome(); len(refused) != 1 || refused[0].Namespace != "victim" || refused[0].Kind != "Secret" {
		t.Fatalf("guard recorded %v", refused)
	}
	mu.Lock()
	defer mu.Unlock()
	for _, s := range seen {
		if strings.Contains(s, "victim") {
			t.Fatalf("the refused request reached the server: %v", seen)
		}
	}
	if len(seen) == 0 {
		t.Fatal("the render made no request at all: the test checked nothing")
	}
}
