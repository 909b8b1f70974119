package helm

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/cli-runtime/pkg/resource"
	"k8s.io/client-go/rest"
)

// Helm's install asks, before it creates the release's objects, whether each exists: a GET
// per object (pkg/action/validate.go, existingResourceConflict). One that exists is adopted
// (updated) when it carries Helm's ownership metadata of the release, and refused otherwise.
// A client-side install of rudder's does not ask: the create itself answers, and an object
// almost never exists. Only for one that does (AlreadyExists) is it read, and adopted or
// refused as Helm's check would have (createExisting, kubeclient.go): the same update, the
// same message. That is two requests fewer for an install of a Deployment and a Service.
// What differs is when a refusal comes (a stranger's object, or a right the release's
// identity lacks): after the release's record is stored and the objects of the kinds before
// it are created, which rudder removes as for any failed install (the failed record kept),
// where Helm's check refused before anything was written. So only a first install skips the
// check: an install over a failed one (Install.Replace, a retry) asks it, and a retry that
// the same object or missing right refuses writes nothing more. A stranger's object is never
// changed either way: the create does not change it, and the guard refuses to write to an
// object the release did not make.

// unasked makes the GETs of Helm's existence check answer NotFound without a request while
// on: from the Build of a client-side first install's objects to its first create or update.
type unasked struct{ on atomic.Bool }

// absentClient is a REST client of cfg whose every request is answered NotFound, locally.
func absentClient(cfg *rest.Config) (*rest.RESTClient, error) {
	return rest.RESTClientForConfigAndClient(cfg, &http.Client{Transport: notFound{}})
}

// notFound answers every request as the API server answers a GET of an object that does not
// exist.
type notFound struct{}

func (notFound) RoundTrip(r *http.Request) (*http.Response, error) {
	body := `{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","reason":"NotFound","code":404,` +
		`"message":"not asked: the create answers (rudder)"}`
	return &http.Response{StatusCode: http.StatusNotFound, Header: http.Header{"Content-Type": {"application/json"}},
		Body: io.NopCloser(strings.NewReader(body)), Request: r}, nil
}

// helmOwned is Helm's check (pkg/action/validate.go, checkOwnership) that live carries the
// ownership metadata the target carries: Helm's managed-by label, and the release's name and
// namespace.
func helmOwned(live any, target *resource.Info) error {
	l, err := meta.Accessor(live)
	if err != nil {
		return err
	}
	t, err := meta.Accessor(target.Object)
	if err != nil {
		return err
	}
	var errs []string
	require := func(what string, have map[string]string, key, want string) {
		switch v, ok := have[key]; {
		case !ok:
			errs = append(errs, fmt.Sprintf("%s validation error: missing key %q: must be set to %q", what, key, want))
		case v != want:
			errs = append(errs, fmt.Sprintf("%s validation error: key %q must equal %q: current value is %q", what, key, want, v))
		}
	}
	require("label", l.GetLabels(), helmManagedBy, "Helm")
	require("annotation", l.GetAnnotations(), helmReleaseName, t.GetAnnotations()[helmReleaseName])
	require("annotation", l.GetAnnotations(), helmReleaseNamespace, t.GetAnnotations()[helmReleaseNamespace])
	if len(errs) > 0 {
		return fmt.Errorf("invalid ownership metadata; %s", strings.Join(errs, "; "))
	}
	return nil
}

// resourceString names info as Helm's messages do (pkg/action/validate.go).
func resourceString(info *resource.Info) string {
	_, k := info.Mapping.GroupVersionKind.ToAPIVersionAndKind()
	return fmt.Sprintf("%s %q in namespace %q", k, info.Name, info.Namespace)
}
