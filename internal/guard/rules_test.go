package guard

import (
	"cmp"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/rudder-operator/rudder/internal/guard/guardtest"
	"github.com/rudder-operator/rudder/internal/records"
)

func TestRules(t *testing.T) {
	c := Confinement{Namespace: "ns", AllowAggregationLabels: []string{"example.com/aggregate-to-widgets"}}
	tests := []struct {
		name, doc string
		want      string // "" = allowed
	}{
		{"plain", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}", ""},
		{"folded namespace", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a, namespace: other, nameſpace: ns}", `"nameſpace"`},
		{"folded kind", "apiVersion: v1\nKind: Secret\nkind: ConfigMap\nmetadata: {name: a}", `"Kind"`},
		{"record by name", "apiVersion: v1\nkind: Secret\nmetadata: {name: sh.helm.release.v1.x.v1}", "its name starts with"},
		{"record by type", "apiVersion: v1\nkind: Secret\ntype: helm.sh/release.v1\nmetadata: {name: x}", "its type is"},
		{"record by label", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x, labels: {owner: helm}}", "owner=helm"},
		{"secret", "apiVersion: v1\nkind: Secret\ntype: Opaque\nmetadata: {name: x, labels: {owner: team}}", ""},
		{"aggregation label", "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata: {name: r, labels: {rbac.authorization.k8s.io/aggregate-to-admin: 'true'}}", "aggregate-to-admin"},
		{"allowed aggregation label", "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata: {name: r, labels: {example.com/aggregate-to-widgets: 'true'}}", ""},
		{"aggregation rule", "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata: {name: r}\naggregationRule: {clusterRoleSelectors: [{matchLabels: {rbac.authorization.k8s.io/aggregate-to-admin: 'true'}}]}", "aggregationRule selecting"},
		{"empty aggregation selector", "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata: {name: r}\naggregationRule: {clusterRoleSelectors: [{}]}", "every label"},
		{"allowed aggregation rule", "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata: {name: r}\naggregationRule: {clusterRoleSelectors: [{matchLabels: {example.com/aggregate-to-widgets: 'true'}}]}", ""},
		{"number label", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a, labels: {app: x, version: 1}}", "metadata.labels.version is a number 1"},
		{"boolean annotation", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a, annotations: {enabled: true}}", "metadata.annotations.enabled is a boolean"},
		{"null label", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a, labels: {app: }}", "metadata.labels.app is null"},
		{"quoted label", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a, labels: {version: '1'}}", ""},
		{"role label", "apiVersion: rbac.authorization.k8s.io/v1\nkind: Role\nmetadata: {name: r, labels: {rudder.dev/aggregate-to-manager: 'true'}}", "aggregate-to-manager"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []Violation
			if err := EachObject([]byte(tt.doc), func(o *unstructured.Unstructured) error {
				got = append(got, c.rules(SourceHook, o)...)
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			switch {
			case tt.want == "" && len(got) > 0:
				t.Fatalf("refused: %v", got)
			case tt.want != "" && (len(got) == 0 || !strings.Contains(got[0].String(), tt.want)):
				t.Fatalf("got %v, want a violation containing %q", got, tt.want)
			}
		})
	}
}

func TestStoredRecords(t *testing.T) {
	rec := func(mod func(*corev1.Secret)) *corev1.Secret {
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "sh.helm.release.v1.a.v1", Labels: map[string]string{"owner": "helm", "name": "a"}},
			Type: records.RecordType}
		if mod != nil {
			mod(s)
		}
		return s
	}
	if !records.IsStoredRecord(rec(nil)) {
		t.Fatal("a record as Helm's storage writes it is not read")
	}
	for name, mod := range map[string]func(*corev1.Secret){
		"rendered (managed label)": func(s *corev1.Secret) { s.Labels[records.LabelManaged] = "true" },
		"rendered (owner mark)":    func(s *corev1.Secret) { s.Annotations = map[string]string{records.AnnotationOwner: "g/K/ns/n"} },
		"another type":             func(s *corev1.Secret) { s.Type = corev1.SecretTypeOpaque },
		"not helm's":               func(s *corev1.Secret) { delete(s.Labels, "owner") },
	} {
		if records.IsStoredRecord(rec(mod)) {
			t.Errorf("%s: read as a revision", name)
		}
	}
}

// TestGuardOwnership: an update, patch or delete reaches only an object marked as the
// release's; a delete carries the UID read as a precondition; a missing object is left to the
// request.
func TestGuardOwnership(t *testing.T) {
	const mine = "g/K/ns/me"
	var deleted string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		name := r.URL.Path[strings.LastIndex(r.URL.Path, "/")+1:]
		if r.Method == http.MethodGet {
			owner := map[string]string{"mine": mine, "theirs": "g/K/ns/other"}[name]
			if name == "missing" {
				w.WriteHeader(http.StatusNotFound)
				return
			}
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(`{"kind":"PartialObjectMetadata","apiVersion":"meta.k8s.io/v1","metadata":{"name":"` + name +
				`","uid":"uid-` + name + `","annotations":{"rudder.dev/owner":"` + owner + `"}}}`))
			return
		}
		if r.Method == http.MethodDelete {
			b := new(strings.Builder)
			_, _ = io.Copy(b, r.Body)
			deleted = b.String()
		}
		w.WriteHeader(http.StatusOK)
	}))
	defer srv.Close()
	g := &Guard{conf: Confinement{Namespace: "ns"}, mapper: guardtest.Mapper(), owner: mine}
	rt := g.Wrap(http.DefaultTransport)
	// A server-side apply is a PATCH too (of its own content type), and creates what is missing.
	const apply = "application/apply-patch+yaml"
	for _, tt := range []struct {
		method, name string
		refused      bool
		contentType  string
	}{
		{http.MethodPatch, "mine", false, ""}, {http.MethodPut, "mine", false, ""}, {http.MethodDelete, "mine", false, ""},
		{http.MethodPatch, "theirs", true, ""}, {http.MethodDelete, "theirs", true, ""}, {http.MethodPatch, "unmarked", true, ""},
		{http.MethodDelete, "missing", false, ""}, {http.MethodGet, "theirs", false, ""},
		{http.MethodPatch, "mine", false, apply}, {http.MethodPatch, "theirs", true, apply}, {http.MethodPatch, "unmarked", true, apply},
		{http.MethodPatch, "missing", false, apply},
	} {
		req, _ := http.NewRequest(tt.method, srv.URL+"/api/v1/namespaces/ns/configmaps/"+tt.name, strings.NewReader(`{"propagationPolicy":"Background"}`))
		req.Header.Set("Content-Type", cmp.Or(tt.contentType, "application/json"))
		resp, err := rt.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if refused := resp.StatusCode == http.StatusForbidden; refused != tt.refused {
			t.Errorf("%s %s (%s): status %d, want refused=%v", tt.method, tt.name, tt.contentType, resp.StatusCode, tt.refused)
		}
		if tt.method == http.MethodDelete && tt.name == "mine" &&
			(!strings.Contains(deleted, `"uid":"uid-mine"`) || !strings.Contains(deleted, `"propagationPolicy":"Background"`)) {
			t.Errorf("the delete's options are %s, want the UID read as a precondition and the caller's options", deleted)
		}
	}
	req, _ := http.NewRequest(http.MethodDelete, srv.URL+"/api/v1/namespaces/ns/configmaps", nil)
	resp, err := rt.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("a deletecollection was not refused: %d", resp.StatusCode)
	}
}
