package libtext_test

import (
	"bytes"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"runtime/debug"
	"strings"
	"syscall"
	"testing"

	"helm.sh/helm/v4/pkg/action"
	"helm.sh/helm/v4/pkg/chart/common"
	chart "helm.sh/helm/v4/pkg/chart/v2"
	"helm.sh/helm/v4/pkg/kube"
	kubefake "helm.sh/helm/v4/pkg/kube/fake"
	release "helm.sh/helm/v4/pkg/release/v1"
	"helm.sh/helm/v4/pkg/storage"
	"helm.sh/helm/v4/pkg/storage/driver"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/apiserver/pkg/endpoints/handlers/responsewriters"
	"k8s.io/cli-runtime/pkg/resource"
	"k8s.io/client-go/kubernetes/scheme"
	restfake "k8s.io/client-go/rest/fake"

	"github.com/rudder-operator/rudder/internal/crtest"
	"github.com/rudder-operator/rudder/internal/libtext"
)

// Each test makes the library say the words libtext decides on, at the version go.mod pins.

func helmConfig(kc kube.Interface) *action.Configuration {
	cfg := action.NewConfiguration(action.ConfigurationSetLogger(slog.DiscardHandler))
	cfg.Releases, cfg.KubeClient, cfg.Capabilities = storage.Init(driver.NewMemory()), kc, common.DefaultCapabilities
	return cfg
}

func quietKube() *kubefake.FailingKubeClient {
	return &kubefake.FailingKubeClient{PrintingKubeClient: kubefake.PrintingKubeClient{Out: io.Discard}}
}

func testChart() *chart.Chart {
	return &chart.Chart{Metadata: &chart.Metadata{APIVersion: chart.APIVersionV2, Name: "words", Version: "0.1.0"},
		Templates: []*common.File{{Name: "templates/cm.yaml", Data: []byte("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: words\n")}}}
}

func install(t *testing.T, cfg *action.Configuration, name string) error {
	t.Helper()
	in := action.NewInstall(cfg)
	in.ReleaseName, in.Namespace = name, "default"
	_, err := in.Run(testChart(), nil)
	return err
}

func TestHelmNameInUse(t *testing.T) {
	cfg := helmConfig(quietKube())
	if err := install(t, cfg, "taken"); err != nil {
		t.Fatal(err)
	}
	err := install(t, cfg, "taken")
	if !libtext.HelmNameInUse(err) {
		t.Fatalf("Helm's install of a taken name says %v, which HelmNameInUse does not recognise", err)
	}
	if libtext.HelmNameInUse(errors.New("another operation (install/upgrade/rollback) is in progress")) || libtext.HelmNameInUse(nil) {
		t.Fatal("HelmNameInUse recognises another error")
	}
}

// TestHelmCannotImport: Helm's install meets a ConfigMap that exists without its release's
// annotations (a REST client that answers every GET with it).
func TestHelmCannotImport(t *testing.T) {
	existing := `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"words","namespace":"default"}}`
	rc := &restfake.RESTClient{NegotiatedSerializer: scheme.Codecs.WithoutConversion(), GroupVersion: schema.GroupVersion{Version: "v1"},
		Client: restfake.CreateHTTPClient(func(*http.Request) (*http.Response, error) {
			return &http.Response{StatusCode: http.StatusOK, Header: http.Header{"Content-Type": {"application/json"}},
				Body: io.NopCloser(strings.NewReader(existing))}, nil
		})}
	obj := &unstructured.Unstructured{}
	if err := obj.UnmarshalJSON([]byte(existing)); err != nil {
		t.Fatal(err)
	}
	info := &resource.Info{Client: rc, Name: "words", Namespace: "default", Object: obj, Mapping: &meta.RESTMapping{
		Resource:         schema.GroupVersionResource{Version: "v1", Resource: "configmaps"},
		GroupVersionKind: schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}, Scope: meta.RESTScopeNamespace}}
	kc := quietKube()
	kc.DummyResources = kube.ResourceList{info}
	err := install(t, helmConfig(kc), "importer")
	if !libtext.HelmCannotImport(err) {
		t.Fatalf("Helm's install over an object it did not make says %v, which HelmCannotImport does not recognise", err)
	}
	if libtext.HelmCannotImport(errors.New("configmaps \"words\" already exists")) {
		t.Fatal("HelmCannotImport recognises another error")
	}
}

func TestHelmRollbackTarget(t *testing.T) {
	cfg := helmConfig(quietKube())
	if err := install(t, cfg, "back"); err != nil {
		t.Fatal(err)
	}
	up := action.NewUpgrade(cfg)
	up.Namespace = "default"
	if _, err := up.Run("back", testChart(), map[string]any{"x": 1}); err != nil {
		t.Fatal(err)
	}
	rb := action.NewRollback(cfg)
	rb.Version = 1
	if err := rb.Run("back"); err != nil {
		t.Fatal(err)
	}
	reli, err := cfg.Releases.Get("back", 3)
	if err != nil {
		t.Fatal(err)
	}
	rel := reli.(*release.Release)
	if to, ok := libtext.HelmRollbackTarget(rel.Info.Description); !ok || to != 1 {
		t.Fatalf("Helm's rollback to 1 describes its revision as %q: HelmRollbackTarget reads %d, %v", rel.Info.Description, to, ok)
	}
	for _, d := range []string{"Upgrade complete", "Install complete", "Rollback to", "Rollback to x", ""} {
		if to, ok := libtext.HelmRollbackTarget(d); ok {
			t.Errorf("HelmRollbackTarget(%q) = %d, true; want false", d, to)
		}
	}
}

// TestUnauthorized: the authorizer's refusal is recognised, for a resource (namespaced and
// cluster-wide, as an impersonated ServiceAccount) and a path; admission's 403 is not.
func TestUnauthorized(t *testing.T) {
	sa := &user.DefaultInfo{Name: "system:serviceaccount:tenant:app"}
	for _, a := range []authorizer.AttributesRecord{
		{User: sa, Verb: "get", Namespace: "tenant", APIGroup: "", Resource: "secrets", Name: "x", ResourceRequest: true},
		{User: sa, Verb: "create", APIGroup: "rbac.authorization.k8s.io", Resource: "clusterroles", ResourceRequest: true},
		{User: sa, Verb: "get", Path: "/version"},
	} {
		err := responsewriters.ForbiddenStatusError(a, "")
		if !libtext.Unauthorized(err.Error()) {
			t.Errorf("the authorizer's refusal %q is not recognised", err.Error())
		}
	}
	quota := `configmaps "x" is forbidden: exceeded quota: q, requested: count/configmaps=1, used: count/configmaps=1, limited: count/configmaps=1`
	webhook := `admission webhook "deny.example.com" denied the request: no`
	for _, msg := range []string{quota, webhook} {
		if libtext.Unauthorized(msg) {
			t.Errorf("admission's refusal %q is taken for the authorizer's", msg)
		}
	}
}

func TestImmutableUpdateWords(t *testing.T) {
	if !libtext.ImmutableUpdate(validation.FieldImmutableErrorMsg) {
		t.Fatalf("apimachinery's FieldImmutableErrorMsg %q is not recognised", validation.FieldImmutableErrorMsg)
	}
	if libtext.ImmutableUpdate(`Deployment.apps "web" is invalid: spec.replicas: Invalid value: -1: must be greater than or equal to 0`) {
		t.Fatal("an invalid value is taken for an immutable field")
	}
}

// The Go runtime's fatal errors, from a child process of this test binary that dies of each.
const childEnv = "LIBTEXT_TEST_DIE"

func TestMain(m *testing.M) {
	switch os.Getenv(childEnv) {
	case "stack":
		debug.SetMaxStack(1 << 20)
		os.Exit(recurse(1))
	case "memory":
		// Room for what the runtime holds now, and not for a 2 GiB slice.
		_ = syscall.Setrlimit(syscall.RLIMIT_AS, &syscall.Rlimit{Cur: 1 << 30, Max: 1 << 30})
		b := make([]byte, 2<<30)
		os.Exit(int(b[len(b)-1]))
	}
	os.Exit(crtest.Main(m, suite))
}

// recurse goes deeper until the stack limit ends the process (n never comes back to 0).
func recurse(n int) int {
	if n == 0 {
		return 0
	}
	var pad [256]byte
	pad[n%256] = byte(n)
	return recurse(n+1) + int(pad[0])
}

func dieOf(t *testing.T, how string) string {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+how)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err == nil {
		t.Fatalf("the child that dies of %s exited 0", how)
	}
	return stderr.String()
}

func TestRuntimeStackExceeded(t *testing.T) {
	if out := dieOf(t, "stack"); !libtext.StackExceeded(out) || libtext.OutOfMemory(out) {
		t.Fatalf("a goroutine past its stack limit: StackExceeded %v, OutOfMemory %v on %q",
			libtext.StackExceeded(out), libtext.OutOfMemory(out), firstLines(out))
	}
}

func TestRuntimeOutOfMemory(t *testing.T) {
	if out := dieOf(t, "memory"); !libtext.OutOfMemory(out) || libtext.StackExceeded(out) {
		t.Fatalf("a process out of memory: OutOfMemory %v, StackExceeded %v on %q",
			libtext.OutOfMemory(out), libtext.StackExceeded(out), firstLines(out))
	}
}

func firstLines(s string) string {
	lines := strings.SplitN(s, "\n", 4)
	return strings.Join(lines[:min(3, len(lines))], "\n")
}
