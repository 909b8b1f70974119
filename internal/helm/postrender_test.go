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
	"testing"

	"helm.sh/helm/v4/pkg/chart/common"
	chart "helm.sh/helm/v4/pkg/chart/v2"
	release "helm.sh/helm/v4/pkg/release/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/rudder-operator/rudder/internal/guard"
	"github.com/rudder-operator/rudder/internal/guard/guardtest"
	"github.com/rudder-operator/rudder/internal/records"
)

// Run post-renders a manifest as one stream, as renderFiles does a render's manifests: its
// objects, each written again as one document. (rudder's actions call renderFiles; Helm is
// given no post-renderer.)
func (p *postRenderer) Run(in *bytes.Buffer) (*bytes.Buffer, error) {
	docs, err := p.run([][]byte{in.Bytes()})
	if err != nil {
		return nil, err
	}
	var out bytes.Buffer
	for _, d := range docs[0] {
		out.WriteString("---\n")
		out.WriteString(d)
	}
	return &out, nil
}

func TestManifestConfinement(t *testing.T) {
	tests := []struct {
		name     string
		conf     guard.Confinement
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
		{"CR of a templates CRD, own namespace", confinement(nil, "CustomResourceDefinition"), guardtest.GearCRD("Namespaced") + "---\n" + guardtest.Gear(""), ""},
		{"CR of a templates CRD, other namespace", confinement(nil, "CustomResourceDefinition"), guardtest.GearCRD("Namespaced") + "---\n" + guardtest.Gear("victim"),
			`Gear "g" in namespace "victim": outside the CR's namespace`},
		{"CR of a cluster-scoped templates CRD", confinement(nil, "CustomResourceDefinition"), guardtest.GearCRD("Cluster") + "---\n" + guardtest.Gear(""),
			`Gear "g": cluster-scoped`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pr := &postRenderer{owner: guard.Owner{GVK: schema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "Widget"},
				Key: types.NamespacedName{Namespace: "tenant", Name: "w"}, UID: "u1"}, conf: tt.conf, scoper: guard.NewScoper(guardtest.Mapper(), nil)}
			out, err := pr.Run(bytes.NewBufferString(tt.manifest))
			checkViolation(t, err, tt.want)
			if tt.want == "" && !strings.Contains(out.String(), records.LabelManaged) {
				t.Errorf("post-rendered manifest lacks the managed label:\n%s", out)
			}
		})
	}
}

// TestManifestOfAnUnservedKind: a kind neither served nor defined by the manifest is refused,
// naming it.
func TestManifestOfAnUnservedKind(t *testing.T) {
	pr := &postRenderer{owner: guard.Owner{GVK: schema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "Widget"},
		Key: types.NamespacedName{Namespace: "tenant", Name: "w"}, UID: "u1"}, conf: confinement(nil), scoper: guard.NewScoper(guardtest.Mapper(), nil)}
	_, err := pr.Run(bytes.NewBufferString(guardtest.Gear("")))
	var unknown *guard.UnknownKindError
	if !errors.As(err, &unknown) || !strings.Contains(err.Error(), `Gear "g"`) {
		t.Fatalf("want an guard.UnknownKindError naming Gear \"g\", got %v", err)
	}
}

func TestHasHooks(t *testing.T) {
	plain := &chart.Chart{Metadata: &chart.Metadata{Name: "p"}, Templates: []*common.File{{Name: "templates/a.yaml", Data: []byte("kind: ConfigMap")}}}
	hooked := &chart.Chart{Metadata: &chart.Metadata{Name: "h"}, Templates: []*common.File{{Name: "templates/h.yaml", Data: []byte(`annotations: {"helm.sh/hook": pre-install}`)}}}
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
		g := guard.New(context.Background(), confinement(nil), guardtest.Mapper(), "", "")
		cfg := &rest.Config{Host: host}
		cfg.Wrap(g.Wrap)
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

func TestLimitsCheckSize(t *testing.T) {
	rel := &release.Release{Manifest: strings.Repeat("---\nkind: A\n", 3),
		Hooks: []*release.Hook{{Manifest: "kind: H\n"}, {Manifest: "kind: H\n---\nkind: I\n"}}}
	if n := countDocuments(rel.Manifest); n != 3 {
		t.Fatalf("counted %d documents, want 3", n)
	}
	if err := (Limits{MaxObjects: 6}).checkSize(rel); err != nil {
		t.Fatalf("6 objects refused at 6: %v", err)
	}
	err := (Limits{MaxObjects: 5}).checkSize(rel)
	if err == nil || !strings.Contains(err.Error(), "maxObjects is 5") {
		t.Fatalf("6 objects at maxObjects 5: %v", err)
	}
	err = (Limits{MaxManifestBytes: 10}).checkSize(rel)
	if err == nil || !strings.Contains(err.Error(), "maxManifestBytes is 10") {
		t.Fatalf("hooks over maxManifestBytes: %v", err)
	}
}

func confinement(allowedNS []string, clusterKinds ...string) guard.Confinement {
	return guard.Confinement{Namespace: "tenant", AllowedNamespaces: allowedNS, AllowClusterScoped: clusterKinds}
}

// checkViolation fails unless err is a ConfinementError that says want ("": err is nil).
func checkViolation(t *testing.T, err error, want string) {
	t.Helper()
	if want == "" {
		if err != nil {
			t.Fatalf("unexpected error: %v", err)
		}
		return
	}
	if ce := (*guard.ConfinementError)(nil); !errors.As(err, &ce) || !strings.Contains(err.Error(), want) {
		t.Fatalf("want a ConfinementError containing %q, got %v", want, err)
	}
}
