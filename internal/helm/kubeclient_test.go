package helm

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path"
	"strings"
	"sync"
	"testing"

	"helm.sh/helm/v4/pkg/kube"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/cli-runtime/pkg/resource"
	"k8s.io/client-go/rest"
)

// createServer answers creates as an API server does: the object as stored (with what the
// server adds: managedFields, a resourceVersion, defaults), or an error Status, or a text
// error; and a GET with the whole object. It keeps the body of every request.
type createServer struct {
	mu     sync.Mutex
	bodies map[string][]byte // "POST /api/v1/…" → body
}

// createAnswers are the answers per resource: a status code and a body.
var createAnswers = map[string]struct {
	code int
	body string
}{
	"deployments": {http.StatusCreated, `{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"s-0001",` +
		`"namespace":"scale","uid":"d1","resourceVersion":"17","generation":1,"labels":{"from":"server"},` +
		`"managedFields":[{"manager":"rudder","operation":"Update","apiVersion":"apps/v1","fieldsType":"FieldsV1",` +
		`"fieldsV1":{"f:metadata":{"f:labels":{".":{},"f:from":{}}},"f:spec":{"f:replicas":{}}}}]},` +
		`"spec":{"replicas":1,"template":{"spec":{"containers":[{"name":"web","image":"nginx"}]}}},"status":{}}`},
	"services": {http.StatusConflict, `{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",` +
		`"message":"services \"s-0001\" already exists","reason":"AlreadyExists",` +
		`"details":{"name":"s-0001","kind":"services"},"code":409}`},
	"configmaps": {http.StatusForbidden, `{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",` +
		`"message":"configmaps is forbidden: User \"x\" cannot create resource","reason":"Forbidden",` +
		`"details":{"kind":"configmaps"},"code":403}`},
	"clusterroles": {http.StatusInternalServerError, "etcd is down"},
}

func (s *createServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	s.mu.Lock()
	s.bodies[r.Method+" "+r.URL.Path] = body
	s.mu.Unlock()
	a := createAnswers[path.Base(r.URL.Path)] // a POST's path ends in its resource
	if r.Method == http.MethodGet {
		a = createAnswers["deployments"]
		a.code = http.StatusOK
	}
	if strings.HasPrefix(a.body, "{") {
		w.Header().Set("Content-Type", "application/json")
	} else {
		w.Header().Set("Content-Type", "text/plain")
	}
	w.WriteHeader(a.code)
	_, _ = w.Write([]byte(a.body))
}

// Helm's create of an object infos built sends what it sends for an object its own Build
// made, and gets the same result: the created object's name, namespace and resourceVersion,
// or the same error (its reason and code kept); only the rest of the answer is not read. A
// GET still reads the whole object, as the three-way merge of an upgrade needs it.
func TestCreateReadsTheAnswersMetadata(t *testing.T) {
	t.Parallel()
	pr, manifest := awkwardPostRendered(t)
	create := func(k kube.Interface) ([]*resource.Info, []error, map[string][]byte) {
		srv := &createServer{bodies: map[string][]byte{}}
		hs := httptest.NewServer(srv)
		t.Cleanup(hs.Close)
		getter := &restClientGetter{cfg: &rest.Config{Host: hs.URL}, namespace: "scale", mapper: StaticMapper()}
		if kc, ok := k.(*kubeClient); ok {
			kc.Client, kc.getter = kube.New(getter), getter
		} else {
			k = kube.New(getter)
		}
		infos, err := k.Build(strings.NewReader(manifest), false)
		if err != nil {
			t.Fatal(err)
		}
		errs := make([]error, len(infos))
		for i, info := range infos {
			_, errs[i] = k.Create(kube.ResourceList{info}, kube.ClientCreateOptionServerSideApply(false, false)) // as rudder creates (Helm 3's client-side apply)
		}
		return infos, errs, srv.bodies
	}
	want, wantErrs, wantBodies := create(nil)
	got, gotErrs, gotBodies := create(&kubeClient{post: pr})
	if len(got) != len(want) || len(want) != 4 {
		t.Fatalf("%d objects, want %d", len(got), len(want))
	}
	if _, ok := got[0].Client.(createClient); !ok {
		t.Fatalf("the objects were not built by infos: their client is %T", got[0].Client)
	}
	for i, w := range want {
		g := got[i]
		id := fmt.Sprintf("object %d (%s)", i, w.Mapping.Resource.Resource)
		if g.Name != w.Name || g.Namespace != w.Namespace || g.ResourceVersion != w.ResourceVersion {
			t.Errorf("%s: created %s/%s at %q, want %s/%s at %q", id, g.Namespace, g.Name, g.ResourceVersion,
				w.Namespace, w.Name, w.ResourceVersion)
		}
		ge, we := gotErrs[i], wantErrs[i]
		if (ge == nil) != (we == nil) || ge != nil && (ge.Error() != we.Error() ||
			apierrors.ReasonForError(ge) != apierrors.ReasonForError(we) || !sameCode(ge, we)) {
			t.Errorf("%s: error %v (%s), want %v (%s)", id, ge, apierrors.ReasonForError(ge), we, apierrors.ReasonForError(we))
		}
	}
	if dep := got[1]; dep.ResourceVersion != "17" || dep.Object.(metav1.Object).GetLabels()["from"] != "server" {
		t.Errorf("the created Deployment is %#v, want the server's answer", dep.Object)
	} else if _, ok := dep.Object.(*metav1.PartialObjectMetadata); !ok {
		t.Errorf("the answer to a create is read whole: %T", dep.Object)
	}
	if !apierrors.IsAlreadyExists(gotErrs[0]) || !apierrors.IsForbidden(gotErrs[2]) || gotErrs[3] == nil {
		t.Errorf("errors %v, want AlreadyExists, Forbidden and the text of a 500", gotErrs)
	}
	if len(gotBodies) != len(wantBodies) {
		t.Errorf("%d requests, want %d", len(gotBodies), len(wantBodies))
	}
	for req, w := range wantBodies {
		if !bytes.Equal(gotBodies[req], w) {
			t.Errorf("%s sent\n%s\nwant\n%s", req, gotBodies[req], w)
		}
	}
	live, err := resource.NewHelper(got[1].Client, got[1].Mapping).Get("scale", "s-0001")
	if err != nil {
		t.Fatal(err)
	}
	if u, ok := live.(*unstructured.Unstructured); !ok || u.Object["spec"] == nil {
		t.Errorf("a GET reads %#v, want the whole object", live)
	}
}

func sameCode(a, b error) bool {
	var sa, sb apierrors.APIStatus
	aok, bok := errors.As(a, &sa), errors.As(b, &sb)
	return aok == bok && (!aok || sa.Status().Code == sb.Status().Code)
}
