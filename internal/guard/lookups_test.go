package guard

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/rudder-operator/rudder/internal/guard/guardtest"
	"github.com/rudder-operator/rudder/internal/records"
)

// TestLookupsReadOnlyWhatTheReleaseMade: a render's lookup of an object the release did not
// make reads as not found, and a list without it; the release's own objects and what the
// watch allows read as they are; a release record never does; past the limit every lookup is
// refused and the render is said to be over it.
func TestLookupsReadOnlyWhatTheReleaseMade(t *testing.T) {
	owner := Owner{GVK: schema.GroupVersionKind{Group: "test.rudder.dev", Version: "v1", Kind: "Box"}, Key: types.NamespacedName{Namespace: "tenant", Name: "box"}}
	mark := records.OwnerAnnotation(owner.GVK.GroupKind(), owner.Key)
	objects := map[string]string{
		"victim": `{"kind":"Secret","metadata":{"name":"victim"},"data":{"password":"c2VjcmV0"}}`,
		"own":    `{"kind":"Secret","metadata":{"name":"own","annotations":{"rudder.dev/owner":"` + mark + `"}},"data":{"k":"dg=="}}`,
		"shared": `{"kind":"Secret","metadata":{"name":"shared"},"data":{"ca":"dg=="}}`,
		"record": `{"kind":"Secret","type":"helm.sh/release.v1","metadata":{"name":"sh.helm.release.v1.box.v1","labels":{"owner":"helm"},"annotations":{"rudder.dev/owner":"` + mark + `"}}}`,
		// The release's own ServiceAccount's token: never read, whoever made it.
		"token": `{"kind":"Secret","type":"kubernetes.io/service-account-token","metadata":{"name":"token","annotations":{"rudder.dev/owner":"` + mark + `"}},"data":{"token":"c2VjcmV0"}}`,
	}
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		name := strings.TrimPrefix(r.URL.Path, "/api/v1/namespaces/tenant/secrets")
		switch name = strings.TrimPrefix(name, "/"); {
		case name == "":
			var items []string
			for _, o := range objects {
				items = append(items, o)
			}
			_, _ = io.WriteString(w, `{"kind":"SecretList","apiVersion":"v1","metadata":{},"items":[`+strings.Join(items, ",")+`]}`)
		case objects[name] != "":
			_, _ = io.WriteString(w, objects[name])
		default:
			http.NotFound(w, r)
		}
	}))
	defer api.Close()
	g := &Guard{conf: Confinement{Namespace: "tenant", AllowReads: []string{"Secret/shared"}}, mapper: guardtest.Mapper(), owner: OwnerOf(owner)}
	l := &Lookups{g: g, max: 6}
	hc := &http.Client{Transport: l.Wrap(http.DefaultTransport)}
	get := func(path string) (int, string) {
		resp, err := hc.Get(api.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	for name, want := range map[string]int{"victim": 404, "own": 200, "shared": 200, "record": 404, "token": 404} {
		if code, body := get("/api/v1/namespaces/tenant/secrets/" + name); code != want || (code == 404 && strings.Contains(body, "c2VjcmV0")) {
			t.Errorf("get %s: %d %s, want %d", name, code, body, want)
		}
	}
	code, body := get("/api/v1/namespaces/tenant/secrets")
	var list struct {
		Items []readHead `json:"items"`
	}
	if err := json.Unmarshal([]byte(body), &list); code != 200 || err != nil {
		t.Fatalf("list: %d %v %s", code, err, body)
	}
	var names []string
	for _, it := range list.Items {
		names = append(names, it.Metadata.Name)
	}
	if strings.Join(names, ",") != "own,shared" && strings.Join(names, ",") != "shared,own" {
		t.Errorf("list kept %v, want own and shared", names)
	}
	over, withheld := l.Outcome()
	if over || len(withheld) != 4 || !strings.Contains(strings.Join(withheld, ";"), "Secret tenant/victim") ||
		!strings.Contains(strings.Join(withheld, ";"), "Secret tenant/token (a ServiceAccount token") {
		t.Errorf("outcome: over %v, withheld %v; want victim, the record and the token withheld", over, withheld)
	}
	if code, _ := get("/api/v1/namespaces/tenant/secrets/own"); code != 403 {
		t.Errorf("the seventh lookup: %d, want it refused", code)
	}
	if over, _ := l.Outcome(); !over {
		t.Error("the render is not said to be over its lookups")
	}
}
