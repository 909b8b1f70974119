package helm

import (
	"bytes"
	"context"
	"errors"
	"io"
	"sync"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chartutil"
	kubefake "helm.sh/helm/v3/pkg/kube/fake"
	"helm.sh/helm/v3/pkg/release"
	"helm.sh/helm/v3/pkg/releaseutil"
	"helm.sh/helm/v3/pkg/storage"
	"helm.sh/helm/v3/pkg/storage/driver"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Memory is Helm without a cluster, for unit tests of what drives it: Helm's own install,
// upgrade, rollback and uninstall actions over Helm's memory storage driver, storing each
// revision with rudder's marks as a Client does (the same checkedDriver stamps the revision
// labels and descriptions), and applying nothing (Helm's fake kube client). Its history is
// the one Helm writes, statuses, labels and superseding included, so that a test of the
// reconciler cannot drift from Helm's behaviour. It holds the releases of one namespace.
//
// It checks no confinement and renders no hooks of its own: those are the Client's, tested
// against a real API server.
type Memory struct {
	mu    sync.Mutex
	store *driver.Memory
	// Kube is the kube client of every action: its errors fail them as the cluster's would.
	// Installs wait for their objects, so that a WaitError fails an install after its revision
	// is stored (the fake client builds no objects to create); an UpdateError fails an upgrade
	// or a rollback the same way. Helm records either failure.
	Kube *kubefake.FailingKubeClient
	// Manifest, when set, is what every install and upgrade renders instead of the chart.
	Manifest string
	// Objects are what Install and Upgrade report of the objects they made (Request.Objects).
	Objects []*unstructured.Unstructured
	// Client is what Writer returns.
	Client client.Client
}

// NewMemory returns an empty Memory.
func NewMemory() *Memory {
	return &Memory{store: driver.NewMemory(), Kube: &kubefake.FailingKubeClient{PrintingKubeClient: kubefake.PrintingKubeClient{Out: io.Discard}}}
}

// storage is the release storage of namespace ns, marking new revisions as st says.
func (m *Memory) storage(ns string, st storing) *storage.Storage {
	m.store.SetNamespace(ns)
	s := storage.Init(&checkedDriver{Driver: m.store, storing: st})
	s.Log = func(string, ...any) {}
	return s
}

func (m *Memory) config(ns string, st storing) *action.Configuration {
	return &action.Configuration{Releases: m.storage(ns, st), KubeClient: m.Kube, Capabilities: chartutil.DefaultCapabilities,
		Log: func(string, ...any) {}}
}

// Seed stores rel as the next revision, as it is (a history found in storage).
func (m *Memory) Seed(rel *release.Release) {
	m.mu.Lock()
	defer m.mu.Unlock()
	st := m.storage(rel.Namespace, storing{})
	rel.Version = 1
	if last, _ := lastOf(st, rel.Name); last != nil {
		rel.Version = last.Version + 1
	}
	if err := st.Create(rel); err != nil {
		panic(err) // a test's own history
	}
}

// History is every stored revision of a release, oldest first.
func (m *Memory) History(ns, name string) []*release.Release {
	m.mu.Lock()
	defer m.mu.Unlock()
	hist, _ := m.storage(ns, storing{}).History(name)
	releaseutil.SortByRevision(hist)
	return hist
}

func (m *Memory) Last(_ context.Context, s Scope, name string) (*release.Release, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return lastOf(m.storage(s.Namespace, storing{}), name)
}

func (m *Memory) LastDeployed(_ context.Context, s Scope, name string, before int) (*release.Release, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return lastDeployedOf(m.storage(s.Namespace, storing{}), name, before)
}

func (m *Memory) Revision(_ context.Context, s Scope, name string, version int) (*release.Release, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return revisionOf(m.storage(s.Namespace, storing{}), name, version)
}

// Head is the newest revision as a cache of the records would show it, from their labels.
func (m *Memory) Head(_ context.Context, s Scope, name string) (*Head, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	hist, err := m.storage(s.Namespace, storing{}).History(name)
	if err != nil && !errors.Is(err, driver.ErrReleaseNotFound) {
		return nil, err
	}
	heads := make([]*Head, 0, len(hist))
	for _, r := range hist {
		heads = append(heads, HeadOf(r))
	}
	return newestHead(heads), nil
}

func (m *Memory) Install(ctx context.Context, req *Request) (*release.Release, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	in := action.NewInstall(m.config(req.Scope.Namespace, storing{stamp: true}))
	in.ReleaseName, in.Namespace, in.Labels, in.Description = req.ReleaseName, req.Scope.Namespace, req.Labels(), req.Description
	in.PostRenderer = m.postRenderer()
	in.Wait = true
	rel, err := in.RunWithContext(ctx, req.Chart, req.Values)
	if err = installResult(err); errors.Is(err, ErrNameInUse) {
		return nil, err
	}
	return rel, m.made(req, err)
}

func (m *Memory) Upgrade(ctx context.Context, req *Request) (*release.Release, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	up := action.NewUpgrade(m.config(req.Scope.Namespace, storing{stamp: true, revision: req.Revision}))
	up.Namespace, up.Labels, up.Description, up.MaxHistory = req.Scope.Namespace, req.Labels(), req.Description, req.MaxHistory
	up.PostRenderer = m.postRenderer()
	rel, err := up.RunWithContext(ctx, req.ReleaseName, req.Chart, req.Values)
	return rel, m.made(req, err)
}

func (m *Memory) made(req *Request, err error) error {
	req.Objects = nil
	if err == nil {
		req.Objects = m.Objects
	}
	return err
}

func (m *Memory) Rollback(_ context.Context, s Scope, req *RollbackRequest) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	rb := action.NewRollback(m.config(s.Namespace, storing{description: req.Description, rollback: true}))
	rb.Version, rb.MaxHistory = req.To, req.MaxHistory
	return rb.Run(req.Name)
}

func (m *Memory) Uninstall(_ context.Context, s Scope, name, description string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	un := action.NewUninstall(m.config(s.Namespace, storing{}))
	un.Description = description
	_, err := un.Run(name)
	if errors.Is(err, driver.ErrReleaseNotFound) {
		return nil
	}
	return err
}

func (m *Memory) Unlock(_ context.Context, s Scope, rel *release.Release) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	return unlock(m.storage(s.Namespace, storing{}), rel)
}

func (m *Memory) Supersede(_ context.Context, s Scope, name string) ([]int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return supersedeOlder(m.storage(s.Namespace, storing{}), name)
}

func (m *Memory) Writer(Scope) (client.Client, error) {
	if m.Client == nil {
		return nil, errors.New("memory helm: no writer")
	}
	return m.Client, nil
}

// Relabel gives every record of the release exactly the carried labels want among keys.
func (m *Memory) Relabel(_ context.Context, s Scope, name string, keys []string, want map[string]string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	st := m.storage(s.Namespace, storing{})
	hist, err := st.History(name)
	if err != nil {
		return err
	}
	for _, r := range hist {
		if CarriedMatch(keys, want, r.Labels) {
			continue
		}
		for _, k := range keys {
			delete(r.Labels, k)
		}
		for k, v := range want {
			r.Labels[k] = v
		}
		if err := st.Update(r); err != nil {
			return err
		}
	}
	return nil
}

// postRenderer replaces what the chart renders with Manifest, when it is set.
func (m *Memory) postRenderer() manifestOverride {
	return manifestOverride(m.Manifest)
}

type manifestOverride string

func (o manifestOverride) Run(rendered *bytes.Buffer) (*bytes.Buffer, error) {
	if o == "" {
		return rendered, nil
	}
	return bytes.NewBufferString(string(o)), nil
}
