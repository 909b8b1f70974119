package helmtest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"time"

	"helm.sh/helm/v4/pkg/action"
	"helm.sh/helm/v4/pkg/chart/common"
	"helm.sh/helm/v4/pkg/kube"
	kubefake "helm.sh/helm/v4/pkg/kube/fake"
	hrelease "helm.sh/helm/v4/pkg/release"
	rcommon "helm.sh/helm/v4/pkg/release/common"
	release "helm.sh/helm/v4/pkg/release/v1"
	releaseutil "helm.sh/helm/v4/pkg/release/v1/util"
	"helm.sh/helm/v4/pkg/storage"
	"helm.sh/helm/v4/pkg/storage/driver"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rudder-operator/rudder/internal/helm"
	"github.com/rudder-operator/rudder/internal/records"
	view "github.com/rudder-operator/rudder/internal/release"
)

// Memory is Helm without a cluster, for unit tests of what drives it: Helm's own install,
// upgrade, rollback, uninstall and test actions over Helm's memory storage driver, storing
// each revision with rudder's marks as a Client does (helm.StoreMarked stamps the revision
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
	// Manifest, when set, is what every install and upgrade stores as its revision's manifest
	// instead of the chart's (Helm 4 parses what a post-renderer returns: it cannot be
	// unreadable there).
	Manifest string
	// Made are what Install and Upgrade report of the objects they made
	// (helm.Request.Objects, and as they sent them, Request.Rendered).
	Made []*unstructured.Unstructured
	// Client is what Writer returns.
	Client client.Client

	// The views, as helm.Client's: what machine.Releases holds.
	History *MemoryHistory
	Actions *MemoryActions
	Owners  *MemoryOwners
	Records *MemoryRecords
	Objects *MemoryObjects
}

// MemoryHistory reads the memory's revisions, as helm.History.
type MemoryHistory struct{ m *Memory }

// MemoryActions runs Helm's actions over the memory, as helm.Actions.
type MemoryActions struct{ m *Memory }

// MemoryOwners is helm.Owners over storage that holds no objects.
type MemoryOwners struct{ m *Memory }

// MemoryRecords writes the memory's records, as helm.Records.
type MemoryRecords struct{ m *Memory }

// MemoryObjects is helm.Objects: it returns Memory.Client.
type MemoryObjects struct{ m *Memory }

// NewMemory returns an empty Memory.
func NewMemory() *Memory {
	m := &Memory{store: driver.NewMemory(),
		Kube: &kubefake.FailingKubeClient{PrintingKubeClient: kubefake.PrintingKubeClient{Out: io.Discard}}}
	m.History, m.Actions, m.Owners = &MemoryHistory{m}, &MemoryActions{m}, &MemoryOwners{m}
	m.Records, m.Objects = &MemoryRecords{m}, &MemoryObjects{m}
	return m
}

// storage is the release storage of namespace ns, marking new revisions as st says.
func (m *Memory) storage(ns string, marks helm.Marks) *storage.Storage {
	m.store.SetNamespace(ns)
	return helm.StoreMarked(manifestStore{Memory: m.store, manifest: m.Manifest}, marks)
}

// manifestStore is a memory driver that stores manifest, when set, as every new revision's.
type manifestStore struct {
	*driver.Memory
	manifest string
}

func (s manifestStore) Create(key string, r hrelease.Releaser) error {
	s.override(r)
	return s.Memory.Create(key, r)
}

func (s manifestStore) Update(key string, r hrelease.Releaser) error {
	s.override(r)
	return s.Memory.Update(key, r)
}

// override gives r, a revision its action is still writing, the manifest, when one is set.
func (s manifestStore) override(r hrelease.Releaser) {
	if rel, err := records.V1(r); err == nil && s.manifest != "" && rel.Info != nil && rel.Info.Status.IsPending() {
		rel.Manifest = s.manifest
	}
}

func (m *Memory) config(ns string, st helm.Marks) *action.Configuration {
	cfg := action.NewConfiguration(action.ConfigurationSetLogger(slog.DiscardHandler))
	cfg.Releases, cfg.KubeClient, cfg.Capabilities = m.storage(ns, st), m.Kube, common.DefaultCapabilities
	return cfg
}

// Seed stores rel as the next revision, as it is (a history found in storage).
func (m *Memory) Seed(rel *release.Release) {
	m.mu.Lock()
	defer m.mu.Unlock()
	st := m.storage(rel.Namespace, helm.Marks{})
	rel.Version = 1
	if last, _ := records.Last(st, rel.Name); last != nil {
		rel.Version = last.Version + 1
	}
	if err := st.Create(rel); err != nil {
		panic(err) // a test's own history
	}
}

// Stored is every stored revision of a release, oldest first.
func (m *Memory) Stored(ns, name string) []*release.Release {
	m.mu.Lock()
	defer m.mu.Unlock()
	hist, _ := records.V1sOf(m.storage(ns, helm.Marks{}).History(name))
	releaseutil.SortByRevision(hist)
	return hist
}

func (h *MemoryHistory) Last(_ context.Context, s helm.Scope, name string) (*view.Release, error) {
	m := h.m
	m.mu.Lock()
	defer m.mu.Unlock()
	return viewOf(records.Last(m.storage(s.Namespace, helm.Marks{}), name))
}

func (h *MemoryHistory) LastDeployed(_ context.Context, s helm.Scope, name string, before int) (*view.Release, error) {
	m := h.m
	m.mu.Lock()
	defer m.mu.Unlock()
	return viewOf(records.LastDeployed(m.storage(s.Namespace, helm.Marks{}), name, before))
}

func (h *MemoryHistory) Revision(_ context.Context, s helm.Scope, name string, version int) (*view.Release, error) {
	m := h.m
	m.mu.Lock()
	defer m.mu.Unlock()
	return viewOf(records.Revision(m.storage(s.Namespace, helm.Marks{}), name, version))
}

// Head is the newest revision as a cache of the records would show it, from their labels.
func (h *MemoryHistory) Head(_ context.Context, s helm.Scope, name string) (*records.Head, error) {
	m := h.m
	m.mu.Lock()
	defer m.mu.Unlock()
	hist, err := records.V1sOf(m.storage(s.Namespace, helm.Marks{}).History(name))
	if err != nil && !errors.Is(err, driver.ErrReleaseNotFound) {
		return nil, err
	}
	heads := make([]*records.Head, 0, len(hist))
	for _, r := range hist {
		heads = append(heads, records.HeadOf(helm.View(r)))
	}
	return records.NewestHead(heads), nil
}

func (a *MemoryActions) Install(ctx context.Context, req *helm.Request) (*view.Release, error) {
	m := a.m
	m.mu.Lock()
	defer m.mu.Unlock()
	marks := helm.Marks{FromSpec: records.ActionInstall, Facts: req.Facts, FailedFacts: req.FailedFacts}
	if req.Replace {
		marks.Revision = req.Revision
	}
	in := action.NewInstall(m.config(req.Scope.Namespace, marks))
	in.ReleaseName, in.Namespace, in.Labels, in.Description = req.ReleaseName, req.Scope.Namespace, req.Labels(), req.Description
	in.Replace = req.Replace
	in.ServerSideApply, in.PostRenderStrategy = false, action.PostRenderStrategyNoHooks
	in.WaitStrategy = kube.StatusWatcherStrategy // the fake's Wait fails as Kube.WaitError says
	rel, err := records.V1Of(in.RunWithContext(ctx, req.Chart, req.Values))
	if err = helm.InstallResult(err); errors.Is(err, helm.ErrNameInUse) {
		return nil, err
	}
	return helm.View(rel), m.made(req, err)
}

func (a *MemoryActions) Upgrade(ctx context.Context, req *helm.Request) (*view.Release, error) {
	m := a.m
	m.mu.Lock()
	defer m.mu.Unlock()
	up := action.NewUpgrade(m.config(req.Scope.Namespace, helm.Marks{FromSpec: records.ActionUpgrade, Revision: req.Revision,
		Facts: req.Facts, FailedFacts: req.FailedFacts}))
	up.Namespace, up.Labels, up.Description, up.MaxHistory = req.Scope.Namespace, req.Labels(), req.Description, req.MaxHistory
	up.ServerSideApply, up.PostRenderStrategy, up.WaitStrategy = "auto", action.PostRenderStrategyNoHooks, kube.HookOnlyStrategy
	rel, err := records.V1Of(up.RunWithContext(ctx, req.ReleaseName, req.Chart, req.Values))
	return helm.View(rel), m.made(req, err)
}

func (m *Memory) made(req *helm.Request, err error) error {
	req.Objects, req.Rendered = nil, nil
	if err == nil {
		req.Objects, req.Rendered = m.Made, m.Made
	}
	return err
}

func (a *MemoryActions) Rollback(_ context.Context, s helm.Scope, req *helm.RollbackRequest) (*view.Release, error) {
	m := a.m
	m.mu.Lock()
	defer m.mu.Unlock()
	rb := action.NewRollback(m.config(s.Namespace, helm.Marks{Description: req.Description, Rollback: true}))
	rb.Version, rb.MaxHistory = req.To, req.MaxHistory
	rb.WaitStrategy, rb.ServerSideApply = kube.HookOnlyStrategy, "auto"
	if err := rb.Run(req.Name); err != nil {
		return nil, err
	}
	return viewOf(records.Last(m.storage(s.Namespace, helm.Marks{}), req.Name))
}

func (a *MemoryActions) Uninstall(_ context.Context, s helm.Scope, name, description string) error {
	m := a.m
	m.mu.Lock()
	defer m.mu.Unlock()
	un := action.NewUninstall(m.config(s.Namespace, helm.Marks{}))
	un.Description = description
	un.WaitStrategy = kube.HookOnlyStrategy
	_, err := un.Run(name)
	if errors.Is(err, driver.ErrReleaseNotFound) {
		return nil
	}
	return err
}

// KeepFailed is helm.Actions.KeepFailed over the memory storage.
func (a *MemoryActions) KeepFailed(_ context.Context, s helm.Scope, name string, maxHistory int) (*view.Release, error) {
	m := a.m
	m.mu.Lock()
	defer m.mu.Unlock()
	st := m.storage(s.Namespace, helm.Marks{})
	last, err := records.Last(st, name)
	if err != nil || last == nil {
		return nil, err
	}
	switch last.Info.Status {
	case rcommon.StatusUninstalled: // its objects removed by a keep that died before it marked the record
	case rcommon.StatusFailed:
		un := action.NewUninstall(m.config(s.Namespace, helm.Marks{}))
		un.Description, un.KeepHistory = last.Info.Description, true
		un.WaitStrategy = kube.HookOnlyStrategy
		if _, err := un.Run(name); err != nil {
			return nil, err
		}
	default:
		return nil, fmt.Errorf("revision %d of %s is %s: only a failed install is kept", last.Version, name, last.Info.Status)
	}
	kept, err := records.KeepFailed(st, name, last.Version, last.Info.Description, maxHistory)
	return helm.View(kept), err
}

// Test runs the release's test hooks on Helm's fake kube client: each succeeds unless
// Kube.WatchUntilReadyError fails it.
func (a *MemoryActions) Test(_ context.Context, s helm.Scope, name string, timeout time.Duration) (*view.Release, error) {
	m := a.m
	m.mu.Lock()
	defer m.mu.Unlock()
	rt := action.NewReleaseTesting(m.config(s.Namespace, helm.Marks{Tested: true}))
	rt.Namespace = s.Namespace
	rt.Timeout = timeout
	return viewOf(helm.RunTests(rt, name, nil))
}

// viewOf is helm.View of what Helm returned.
func viewOf(rel *release.Release, err error) (*view.Release, error) { return helm.View(rel), err }
