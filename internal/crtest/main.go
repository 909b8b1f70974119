package crtest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	uzap "go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/rudder-operator/rudder/internal/cli"
	"github.com/rudder-operator/rudder/internal/testcluster"
)

// Suite is what a package's integration tests share: one control plane for the package's
// test binary.
type Suite struct {
	// Skip, when it reports true, runs the tests with no control plane (e.g. a benchmark
	// package under `go test` without -bench).
	Skip func() bool
	// Options adjusts testcluster.All() (its CRD paths, …); root is the repository root.
	Options func(o *testcluster.Options, root string)
	// Scheme of Env.Client (nil: client-go's).
	Scheme *runtime.Scheme
	// LogLevel of controller-runtime's logger (default: info, or everything with
	// RUDDER_TEST_VERBOSE set).
	LogLevel *zapcore.Level
	// BeforeStart runs before the control plane starts (the processes it forks inherit the
	// CPU affinity this process has then).
	BeforeStart func() error
	// Setup runs once the control plane is up, before the tests; the teardown it returns
	// (may be nil) runs after them, and its error fails the run.
	Setup func(e *Env) (teardown func() error, err error)
}

// Env is the running control plane of a Suite.
type Env struct {
	Cluster *testcluster.Cluster
	// Client is uncached: assertions see the API server, not rudder's cache.
	Client client.Client
	// Root is the repository root.
	Root string
}

// Main runs a package's tests against the Suite's control plane and returns the exit code:
// `func TestMain(m *testing.M) { os.Exit(crtest.Main(m, suite)) }`. On a failure it dumps the
// control plane's logs.
func Main(m *testing.M, s Suite) int {
	if testcluster.ShortMode() || (s.Skip != nil && s.Skip()) {
		// No control plane: the integration tests skip themselves (NeedsCluster), the unit
		// tests run.
		return m.Run()
	}
	level := zapcore.InfoLevel
	if os.Getenv("RUDDER_TEST_VERBOSE") != "" {
		level = zapcore.Level(-2)
	}
	if s.LogLevel != nil {
		level = *s.LogLevel
	}
	// Lazy fields as main.go's logger has them: the benchmarks count what a pass allocates.
	ctrl.SetLogger(zap.New(zap.UseDevMode(true), zap.Level(level), zap.RawZapOpts(uzap.WrapCore(cli.LazyFields))))
	code, err := run(m, s)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return code
}

func run(m *testing.M, s Suite) (code int, err error) {
	env := &Env{}
	if env.Root, err = testcluster.RepoRoot(); err != nil {
		return 1, err
	}
	opts := testcluster.All()
	if s.Options != nil {
		s.Options(&opts, env.Root)
	}
	if s.BeforeStart != nil {
		if err := s.BeforeStart(); err != nil {
			return 1, err
		}
	}
	if env.Cluster, err = testcluster.Start(context.Background(), opts); err != nil {
		return 1, fmt.Errorf("starting the test control plane: %w", err)
	}
	defer func() {
		if code != 0 {
			env.Cluster.DumpLogs(os.Stderr)
		}
		err = errors.Join(err, env.Cluster.Stop())
	}()
	if env.Client, err = client.New(env.Cluster.ClientConfig(), client.Options{Scheme: s.Scheme}); err != nil {
		return 1, err
	}
	teardown := func() error { return nil }
	if s.Setup != nil {
		td, err := s.Setup(env)
		if err != nil {
			return 1, err
		}
		if td != nil {
			teardown = td
		}
	}
	code = m.Run()
	if err := teardown(); err != nil {
		return 1, err
	}
	return code, nil
}

// StartManager runs mgr until the returned stop is called; stop returns the manager's error.
func StartManager(mgr manager.Manager) (stop func() error) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	return func() error {
		cancel()
		if err := <-done; err != nil {
			return fmt.Errorf("manager: %w", err)
		}
		return nil
	}
}

// NewNamespace creates a namespace named prefix plus a random suffix.
func NewNamespace(t testing.TB, c client.Client, prefix string) string {
	t.Helper()
	NeedsCluster(t)
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: prefix}}
	if err := c.Create(context.Background(), ns); err != nil {
		t.Fatal(err)
	}
	return ns.Name
}

// NeedsCluster skips an integration test under `go test -short`, where Main starts no control
// plane. Every integration test calls it first, directly or through NewNamespace; a test that
// does not is a unit test, and runs in the fast loop too.
func NeedsCluster(t testing.TB) {
	t.Helper()
	if testing.Short() {
		t.Skip("needs the control plane (go test without -short)")
	}
}

// NewCR is an unstructured CR with a spec.
func NewCR(gvk schema.GroupVersionKind, ns, name string, spec map[string]any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"spec": spec}}
	u.SetGroupVersionKind(gvk)
	u.SetNamespace(ns)
	u.SetName(name)
	return u
}

// PassCounter counts rudder's passes over each CR and what each saw: give its Observe to
// wiring.ManagerOptions.OnPass of the rudder running in the test's process.
type PassCounter struct {
	mu sync.Mutex
	// pokes is, per CR, the poke annotation values passes saw.
	pokes map[passOf]map[string]bool
}

type passOf struct {
	gvk schema.GroupVersionKind
	key types.NamespacedName
}

// pokeAnnotation is what Passes changes to cause a pass.
const pokeAnnotation = "test.rudder.dev/poke"

// NewPassCounter returns a counter of no passes yet.
func NewPassCounter() *PassCounter { return &PassCounter{pokes: map[passOf]map[string]bool{}} }

// Observe records a pass that read cr (nil: the CR was gone).
func (pc *PassCounter) Observe(gvk schema.GroupVersionKind, cr *unstructured.Unstructured) {
	if cr == nil {
		return
	}
	poke, ok := cr.GetAnnotations()[pokeAnnotation]
	if !ok {
		return
	}
	pc.mu.Lock()
	defer pc.mu.Unlock()
	k := passOf{gvk, client.ObjectKeyFromObject(cr)}
	if pc.pokes[k] == nil {
		pc.pokes[k] = map[string]bool{}
	}
	pc.pokes[k][poke] = true
}

func (pc *PassCounter) saw(gvk schema.GroupVersionKind, ns, name, poke string) bool {
	pc.mu.Lock()
	defer pc.mu.Unlock()
	return pc.pokes[passOf{gvk, types.NamespacedName{Namespace: ns, Name: name}}][poke]
}

// Passes makes n passes of rudder over the CR happen, one after another, and returns once each
// has completed: it sets an annotation to a new value, which always causes a pass, and waits
// until a pass of this CR that read that value has ended (a pass of another CR, or one of this
// CR already under way, does not count). Assert "nothing happened" after it, never after a
// sleep.
func (pc *PassCounter) Passes(t testing.TB, c client.Client, gvk schema.GroupVersionKind, ns, name string, n int) {
	t.Helper()
	ctx := context.Background()
	for i := range n {
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(gvk)
		u.SetNamespace(ns)
		u.SetName(name)
		poke := fmt.Sprintf("%d-%d", time.Now().UnixNano(), i)
		// A merge patch of the annotation alone: no conflict with rudder's status writes.
		patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, pokeAnnotation, poke)
		if err := c.Patch(ctx, u, client.RawPatch(types.MergePatchType, []byte(patch))); err != nil {
			t.Fatal(err)
		}
		Eventually(t, fmt.Sprintf("pass %d of %s %s/%s", i+1, gvk.Kind, ns, name), 60*time.Second, func(context.Context) (bool, error) {
			return pc.saw(gvk, ns, name, poke), nil
		})
	}
}

// MustGet reads a CR as unstructured, failing the test on an error.
func MustGet(t testing.TB, c client.Reader, gvk schema.GroupVersionKind, ns, name string) *unstructured.Unstructured {
	t.Helper()
	u, err := Get(context.Background(), c, gvk, ns, name)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// Update changes a CR with change and writes it, reading it again and retrying when rudder
// wrote its status in between (a conflict).
func Update(t testing.TB, c client.Client, gvk schema.GroupVersionKind, ns, name string, change func(u *unstructured.Unstructured)) {
	t.Helper()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		u, err := Get(context.Background(), c, gvk, ns, name)
		if err != nil {
			return err
		}
		change(u)
		return c.Update(context.Background(), u)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// BuildRudder builds rudder from the checkout at root into dir/rudder, for tests and
// benchmarks that run it as a process of its own, and returns the binary's path.
func BuildRudder(root, dir string) (string, error) {
	bin := filepath.Join(dir, "rudder")
	// As the image builds it (Dockerfile, make build): a static binary. A cgo build links
	// dynamically, which alone adds about 34 MiB of resident file pages.
	build := exec.Command("go", "build", "-trimpath", "-ldflags", "-s -w", "-o", bin, ".")
	build.Dir = root
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		return "", fmt.Errorf("building rudder: %w\n%s", err, out)
	}
	return bin, nil
}
