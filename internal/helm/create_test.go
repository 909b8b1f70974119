package helm

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"helm.sh/helm/v4/pkg/kube"
	"k8s.io/client-go/rest"
)

// TestCreatesDoNotTakeTurns: the client-side creates of two actions run at once. Helm 4's own
// create takes one lock for the whole process (helm.sh/helm/v4 pkg/kube, createResource),
// which would queue every install's creates behind every other's: here the API server answers
// the first create only once the second has arrived, which behind that lock it never would.
func TestCreatesDoNotTakeTurns(t *testing.T) {
	t.Parallel()
	arrived, answer := make(chan string, 2), make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			arrived <- r.URL.Path
			select {
			case <-answer:
			case <-time.After(30 * time.Second):
			}
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write([]byte(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c","namespace":"scale","resourceVersion":"7"}}`))
	}))
	defer srv.Close()
	getter := &restClientGetter{cfg: &rest.Config{Host: srv.URL}, namespace: "scale", mapper: StaticMapper()}
	done := make(chan error, 2)
	for _, name := range []string{"a", "b"} {
		k := &kubeClient{Client: kube.New(getter), getter: getter}
		infos, err := k.Build(strings.NewReader("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: "+name+"}\n"), false)
		if err != nil {
			t.Fatal(err)
		}
		go func() {
			_, err := k.Create(infos, kube.ClientCreateOptionServerSideApply(false, false))
			done <- err
		}()
	}
	for range 2 {
		select {
		case <-arrived:
		case <-time.After(10 * time.Second):
			close(answer)
			t.Fatal("the second create did not reach the API server while the first was being answered: creates take turns")
		}
	}
	close(answer)
	for range 2 {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
}
