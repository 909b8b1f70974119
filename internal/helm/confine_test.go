package helm

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"

	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	"helm.sh/helm/v3/pkg/release"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/rudder-operator/rudder/internal/records"
)

// testMapper serves the kinds the tests render: ConfigMap, Secret, Pod (namespaced), and
// Namespace, ClusterRole, CustomResourceDefinition (cluster-scoped).
func testMapper() meta.RESTMapper {
	m := meta.NewDefaultRESTMapper(nil)
	for _, k := range []struct {
		gvk   schema.GroupVersionKind
		scope meta.RESTScope
	}{
		{schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}, meta.RESTScopeNamespace},
		{schema.GroupVersionKind{Version: "v1", Kind: "Secret"}, meta.RESTScopeNamespace},
		{schema.GroupVersionKind{Version: "v1", Kind: "Pod"}, meta.RESTScopeNamespace},
		{schema.GroupVersionKind{Version: "v1", Kind: "Namespace"}, meta.RESTScopeRoot},
		{schema.GroupVersionKind{Group: "rbac.authorization.k8s.io", Version: "v1", Kind: "ClusterRole"}, meta.RESTScopeRoot},
		{CRDKind, meta.RESTScopeRoot},
	} {
		m.Add(k.gvk, k.scope)
	}
	return m
}

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

func TestManifestConfinement(t *testing.T) {
	tests := []struct {
		name     string
		conf     Confinement
		manifest string
		// want is a substring of the violation, "" for none.
		want string
	}{
		{"own namespace implied", confinement(nil), "kind: ConfigMap\napiVersion: v1\nmetadata: {name: a}\n", ""},
		{"own namespace named", confinement(nil), "kind: ConfigMap\napiVersion: v1\nmetadata: {name: a, namespace: tenant}\n", ""},
		{"other namespace", confinement(nil), "kind: ConfigMap\napiVersion: v1\nmetadata: {name: a, namespace: victim}\n",
			`manifest ConfigMap "a" in namespace "victim": outside the CR's namespace "tenant"`},
		{"allowed namespace", confinement([]string{"shared"}), "kind: ConfigMap\napiVersion: v1\nmetadata: {name: a, namespace: shared}\n", ""},
		{"any namespace", confinement([]string{"*"}), "kind: ConfigMap\napiVersion: v1\nmetadata: {name: a, namespace: kube-system}\n", ""},
		{"cluster-scoped refused", confinement(nil), "kind: ClusterRole\napiVersion: rbac.authorization.k8s.io/v1\nmetadata: {name: r}\n",
			`ClusterRole "r": cluster-scoped, and the watch's allowClusterScoped does not name ClusterRole`},
		{"cluster-scoped by kind", confinement(nil, "ClusterRole"), "kind: ClusterRole\napiVersion: rbac.authorization.k8s.io/v1\nmetadata: {name: r}\n", ""},
		{"cluster-scoped by kind.group", confinement(nil, "ClusterRole.rbac.authorization.k8s.io"), "kind: ClusterRole\napiVersion: rbac.authorization.k8s.io/v1\nmetadata: {name: r}\n", ""},
		{"kind.group of another group", confinement(nil, "ClusterRole.example.com"), "kind: ClusterRole\napiVersion: rbac.authorization.k8s.io/v1\nmetadata: {name: r}\n", "cluster-scoped"},
		// A kind the API server does not serve yet, defined by a CRD of the same manifest
		// (templates/): its scope is the CRD's.
		{"CR of a templates CRD, own namespace", confinement(nil, "CustomResourceDefinition"), gearCRD("Namespaced") + "---\n" + gear(""), ""},
		{"CR of a templates CRD, other namespace", confinement(nil, "CustomResourceDefinition"), gearCRD("Namespaced") + "---\n" + gear("victim"),
			`Gear "g" in namespace "victim": outside the CR's namespace`},
		{"CR of a cluster-scoped templates CRD", confinement(nil, "CustomResourceDefinition"), gearCRD("Cluster") + "---\n" + gear(""),
			`Gear "g": cluster-scoped`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pr := &postRenderer{owner: Owner{GVK: schema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "Widget"},
				Key: types.NamespacedName{Namespace: "tenant", Name: "w"}, UID: "u1"}, conf: tt.conf, scoper: newScoper(testMapper(), nil)}
			out, err := pr.Run(bytes.NewBufferString(tt.manifest))
			checkViolation(t, err, tt.want)
			if tt.want == "" && !strings.Contains(out.String(), records.LabelManaged) {
				t.Errorf("post-rendered manifest lacks the managed label:\n%s", out)
			}
		})
	}
}

func gearCRD(scope string) string {
	return "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata: {name: gears.example.com}\n" +
		"spec: {group: example.com, scope: " + scope + ", names: {kind: Gear, plural: gears}, versions: [{name: v1, served: true, storage: true}]}\n"
}

func gear(ns string) string {
	return "apiVersion: example.com/v1\nkind: Gear\nmetadata: {name: g, namespace: '" + ns + "'}\n"
}

// TestManifestOfAnUnservedKind: a kind neither served nor defined by the manifest is refused,
// naming it.
func TestManifestOfAnUnservedKind(t *testing.T) {
	pr := &postRenderer{owner: Owner{GVK: schema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "Widget"},
		Key: types.NamespacedName{Namespace: "tenant", Name: "w"}, UID: "u1"}, conf: confinement(nil), scoper: newScoper(testMapper(), nil)}
	_, err := pr.Run(bytes.NewBufferString(gear("")))
	var unknown *UnknownKindError
	if !errors.As(err, &unknown) || !strings.Contains(err.Error(), `Gear "g"`) {
		t.Fatalf("want an UnknownKindError naming Gear \"g\", got %v", err)
	}
}

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
	hook := func(ns string, events ...release.HookEvent) *release.Hook {
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
		{"hook in own namespace", &release.Release{Hooks: []*release.Hook{hook("", release.HookPreInstall)}}, false, ""},
		{"pre-install hook elsewhere", &release.Release{Hooks: []*release.Hook{hook("kube-system", release.HookPreInstall)}}, false,
			`hook (pre-install) Pod "h" in namespace "kube-system"`},
		{"every event is checked", &release.Release{Hooks: []*release.Hook{hook("victim", release.HookPostDelete, release.HookTest)}}, false,
			`hook (post-delete,test) Pod "h" in namespace "victim"`},
		{"manifest unchecked unless asked", &release.Release{Manifest: "apiVersion: v1\nkind: Pod\nmetadata: {name: m, namespace: victim}\n"}, false, ""},
		{"manifest checked when asked", &release.Release{Manifest: "apiVersion: v1\nkind: Pod\nmetadata: {name: m, namespace: victim}\n"}, true,
			`manifest Pod "m" in namespace "victim"`},
		{"kind of the chart's own CRD", &release.Release{Hooks: []*release.Hook{{Name: "w", Events: []release.HookEvent{release.HookPostInstall},
			Manifest: "apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: w, namespace: victim}\n"}}}, false,
			`hook (post-install) Widget "w" in namespace "victim"`},
	}
	ch := &chart.Chart{Metadata: &chart.Metadata{Name: "c"}, Files: []*chart.File{{Name: "crds/widget.yaml", Data: []byte(widgetCRD)}}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			checkViolation(t, confinement(nil).CheckRelease(testMapper(), tt.rel, ch, tt.manifest), tt.want)
		})
	}
}

func TestCRDConfinement(t *testing.T) {
	ch := &chart.Chart{Metadata: &chart.Metadata{Name: "c"}, Files: []*chart.File{{Name: "crds/widget.yaml", Data: []byte(widgetCRD)}}}
	checkViolation(t, confinement(nil).CheckCRDs(testMapper(), ch),
		`CRD (crds/) CustomResourceDefinition "widgets.example.com": cluster-scoped, and the watch's allowClusterScoped does not name CustomResourceDefinition`)
	checkViolation(t, confinement(nil, "CustomResourceDefinition").CheckCRDs(testMapper(), ch), "")
	checkViolation(t, confinement(nil, "ClusterRole").CheckCRDs(testMapper(), ch), "CustomResourceDefinition")
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
			g := &guard{conf: tt.conf, mapper: testMapper()}
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

	render := func(ns string) (map[string]string, *guard, error) {
		g := &guard{conf: confinement(nil), mapper: testMapper()}
		cfg := &rest.Config{Host: srv.URL}
		cfg.Wrap(g.wrap)
		ch := &chart.Chart{Metadata: &chart.Metadata{Name: "c", Version: "0.1.0", APIVersion: "v2"}, Templates: []*chart.File{{
			Name: "templates/cm.yaml",
			Data: []byte(`data: {{ (lookup "v1" "Secret" .Values.ns "s").data | toJson | quote }}`),
		}}}
		vals, err := chartutil.ToRenderValues(ch, map[string]any{"ns": ns}, chartutil.ReleaseOptions{Name: "r", Namespace: "tenant"}, nil)
		if err != nil {
			t.Fatal(err)
		}
		out, err := engine.New(cfg).Render(ch, vals)
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
	if refused, _ := g.outcome(); len(refused) != 1 || refused[0].Namespace != "victim" || refused[0].Kind != "Secret" {
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

func TestHasHooks(t *testing.T) {
	plain := &chart.Chart{Metadata: &chart.Metadata{Name: "p"}, Templates: []*chart.File{{Name: "templates/a.yaml", Data: []byte("kind: ConfigMap")}}}
	hooked := &chart.Chart{Metadata: &chart.Metadata{Name: "h"}, Templates: []*chart.File{{Name: "templates/h.yaml", Data: []byte(`annotations: {"helm.sh/hook": pre-install}`)}}}
	parent := &chart.Chart{Metadata: &chart.Metadata{Name: "parent"}}
	parent.SetDependencies(plain, hooked)
	if hasHooks(plain) || !hasHooks(hooked) || !hasHooks(parent) {
		t.Fatalf("plain %v, hooked %v, parent of hooked %v", hasHooks(plain), hasHooks(hooked), hasHooks(parent))
	}
}

// An action whose request failed for now (etcd down behind the API server, the server
// unreachable) fails with an UnavailableError, although Helm's kube client flattens the
// request's error into text; a failure the chart or values caused does not.
func TestUnavailableSurvivesHelmsFlattening(t *testing.T) {
	const etcdDown = "rpc error: code = Unavailable desc = error reading from server: connection reset by peer"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		st := metav1.Status{TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}, Status: metav1.StatusFailure}
		switch r.URL.Path {
		case "/api/v1/namespaces/tenant/configmaps/down":
			st.Code, st.Reason, st.Message = http.StatusInternalServerError, metav1.StatusReasonInternalError, etcdDown
		default:
			st.Code, st.Reason, st.Message = http.StatusUnprocessableEntity, metav1.StatusReasonInvalid, `ConfigMap "bad" is invalid: data: too long`
		}
		w.WriteHeader(int(st.Code))
		_ = json.NewEncoder(w).Encode(st)
	}))
	defer srv.Close()
	closed := httptest.NewServer(http.NotFoundHandler())
	closed.Close()

	// What Helm's kube client returns for a failed update: the request's error, as text.
	var lastErr error // the client's error of the last request
	flattened := func(host, name string) (*run, error) {
		g := &guard{conf: confinement(nil), mapper: testMapper()}
		cfg := &rest.Config{Host: host}
		cfg.Wrap(g.wrap)
		cs, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			t.Fatal(err)
		}
		_, err = cs.CoreV1().ConfigMaps("tenant").Patch(context.Background(), name, types.MergePatchType, []byte(`{}`), metav1.PatchOptions{})
		if err == nil {
			t.Fatal("the patch succeeded")
		}
		lastErr = err
		return &run{guard: g}, errors.New(fmt.Sprintf("cannot patch %q with kind ConfigMap: %v", name, err)) //nolint:staticcheck // text, as Helm keeps it
	}
	for _, tc := range []struct {
		name, host, object string
		want               bool
	}{
		{"etcd down behind the API server", srv.URL, "down", true},
		{"API server unreachable", closed.URL, "down", true},
		{"invalid object", srv.URL, "bad", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := flattened(tc.host, tc.object)
			if got := IsUnavailable(r.result(err)); got != tc.want {
				t.Fatalf("IsUnavailable(%q) = %v, want %v", err, got, tc.want)
			}
		})
	}
	// A request that failed for now does not make another failure of the action transient,
	// even one whose text has the transport's words in it.
	r, _ := flattened(srv.URL, "down")
	if IsUnavailable(r.result(errors.New(`ConfigMap "bad" is invalid: data: too long`))) {
		t.Fatal("an invalid object was taken for an outage seen by another request")
	}
	r, _ = flattened(closed.URL, "down")
	var transport *url.Error
	if !errors.As(lastErr, &transport) {
		t.Fatalf("the client's error %v is not a url.Error", lastErr)
	}
	if IsUnavailable(r.result(errors.New("template: web/templates/cm.yaml:3: " + transport.Err.Error()))) {
		t.Fatal("a chart's error was taken for the transport's failure of another request")
	}
}

// TestStaticMapperGuesses: without a cluster, a kind client-go lacks gets its guessed plural,
// cluster-scoped when it is a built-in one of another API server or named Cluster*.
func TestStaticMapperGuesses(t *testing.T) {
	for _, tc := range []struct {
		gvk      schema.GroupVersionKind
		resource string
		root     bool
	}{
		{schema.GroupVersionKind{Group: "apiregistration.k8s.io", Version: "v1", Kind: "APIService"}, "apiservices", true},
		{schema.GroupVersionKind{Group: "cert-manager.io", Version: "v1", Kind: "ClusterIssuer"}, "clusterissuers", true},
		{schema.GroupVersionKind{Group: "cert-manager.io", Version: "v1", Kind: "Certificate"}, "certificates", false},
		{schema.GroupVersionKind{Group: "rbac.authorization.k8s.io", Version: "v1", Kind: "ClusterRole"}, "clusterroles", true},
		{schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}, "configmaps", false},
	} {
		m, err := StaticMapper().RESTMapping(tc.gvk.GroupKind(), tc.gvk.Version)
		if err != nil {
			t.Fatal(err)
		}
		if m.Resource.Resource != tc.resource || (m.Scope.Name() == meta.RESTScopeNameRoot) != tc.root {
			t.Errorf("%s: %s, %s; want %s, cluster-scoped %v", tc.gvk, m.Resource.Resource, m.Scope.Name(), tc.resource, tc.root)
		}
	}
}
