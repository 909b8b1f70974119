package controllers

import (
	"context"
	"fmt"
	"sync"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rudder-operator/rudder/internal/helm"
	"github.com/rudder-operator/rudder/internal/helm/helmtest"
	"github.com/rudder-operator/rudder/internal/machine"
	"github.com/rudder-operator/rudder/internal/records"
	"github.com/rudder-operator/rudder/internal/release"
)

// releases is the boundary as the spy serves it: every view is the spy.
func (f *fakeHelm) releases() machine.Releases {
	return machine.Releases{History: f, Actions: f, Owners: f, Records: f, Objects: f}
}

// fakeHelm is Helm without a cluster — helmtest.Memory, Helm's own actions over its memory
// storage driver, so that its history is the one Helm writes — with a spy's hooks: it
// records the calls the reconciler makes of storage and actions (the cached Head costs no
// request and is not one), and fails those a case asks it to.
type fakeHelm struct {
	*helmtest.Memory
	mu    sync.Mutex
	calls []string
	// hidden: the cache shows none of the release's records (a shard that does not select
	// them yet).
	hidden bool

	// What the next actions do: a non-nil error fails them; stores says whether a failed
	// install or upgrade leaves a failed revision (the cluster refuses an object: Helm records
	// the failure) or nothing (a refusal before anything is stored, such as a confinement
	// violation).
	installErr, upgradeErr, rollbackErr, lastErr, testErr error
	stores                                                bool
	// failNth fails the Nth call (from 1) of a method (by name) with nthErr: a transient error
	// in the middle of a pass.
	failNth map[string]int
	nthErr  error
	counts  map[string]int
	// factWrites counts the writes of the release's facts (WriteFacts); factsErr fails them.
	factWrites int
	factsErr   error
}

func newFakeHelm(writer client.Client, manifest string) *fakeHelm {
	m := helmtest.NewMemory()
	m.Manifest, m.Client = manifest, writer
	return &fakeHelm{Memory: m}
}

// call records a call and returns the error it fails with (nil: none).
func (f *fakeHelm) call(method, format string, args ...any) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, method+fmt.Sprintf(format, args...))
	if f.counts == nil {
		f.counts = map[string]int{}
	}
	f.counts[method]++
	if n, ok := f.failNth[method]; ok && n == f.counts[method] {
		return f.nthErr
	}
	return nil
}

// Calls returns the calls made so far and forgets them.
func (f *fakeHelm) Calls() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	c := f.calls
	f.calls = nil
	return c
}

// failing runs action with the kube client failing as err says when the revision is stored,
// or fails it before anything is stored.
func (f *fakeHelm) failing(err error, set func(error), action func() error) error {
	switch {
	case err == nil:
		return action()
	case !f.stores:
		return err
	}
	set(err)
	defer set(nil)
	return action()
}

func (f *fakeHelm) Head(ctx context.Context, s helm.Scope, name string) (*records.Head, error) {
	if f.hidden {
		return nil, nil
	}
	return f.History.Head(ctx, s, name)
}

func (f *fakeHelm) Last(ctx context.Context, s helm.Scope, name string) (*release.Release, error) {
	if err := f.call("Last", ""); err != nil {
		return nil, err
	}
	if f.lastErr != nil {
		return nil, f.lastErr
	}
	return f.History.Last(ctx, s, name)
}

func (f *fakeHelm) LastDeployed(ctx context.Context, s helm.Scope, name string, before int) (*release.Release, error) {
	if err := f.call("LastDeployed", ""); err != nil {
		return nil, err
	}
	return f.History.LastDeployed(ctx, s, name, before)
}

func (f *fakeHelm) Revision(ctx context.Context, s helm.Scope, name string, version int) (*release.Release, error) {
	if err := f.call("Revision", " %d", version); err != nil {
		return nil, err
	}
	return f.History.Revision(ctx, s, name, version)
}

func (f *fakeHelm) Install(ctx context.Context, req *helm.Request) (*release.Release, error) {
	if err := f.call("Install", ""); err != nil {
		return nil, err
	}
	var rel *release.Release
	err := f.failing(f.installErr, func(err error) { f.Kube.WaitError = err }, func() (err error) {
		rel, err = f.Actions.Install(ctx, req)
		return err
	})
	return rel, err
}

func (f *fakeHelm) Upgrade(ctx context.Context, req *helm.Request) (*release.Release, error) {
	if err := f.call("Upgrade", ""); err != nil {
		return nil, err
	}
	var rel *release.Release
	err := f.failing(f.upgradeErr, func(err error) { f.Kube.UpdateError = err }, func() (err error) {
		rel, err = f.Actions.Upgrade(ctx, req)
		return err
	})
	return rel, err
}

func (f *fakeHelm) Rollback(ctx context.Context, s helm.Scope, req *helm.RollbackRequest) (*release.Release, error) {
	if err := f.call("Rollback", " %d", req.To); err != nil {
		return nil, err
	}
	if f.rollbackErr != nil {
		return nil, f.rollbackErr
	}
	return f.Actions.Rollback(ctx, s, req)
}

func (f *fakeHelm) Uninstall(ctx context.Context, s helm.Scope, name, desc string) error {
	if err := f.call("Uninstall", ""); err != nil {
		return err
	}
	return f.Actions.Uninstall(ctx, s, name, desc)
}

func (f *fakeHelm) ProveForeign(ctx context.Context, s helm.Scope, name string) (*helm.Proof, error) {
	if err := f.call("ProveForeign", ""); err != nil {
		return nil, err
	}
	return f.Owners.ProveForeign(ctx, s, name)
}

func (f *fakeHelm) AdoptForeign(ctx context.Context, s helm.Scope, name string, p *helm.Proof, labels map[string]string) error {
	if err := f.call("AdoptForeign", ""); err != nil {
		return err
	}
	return f.Owners.AdoptForeign(ctx, s, name, p, labels)
}

func (f *fakeHelm) MarkRevision(ctx context.Context, s helm.Scope, name string, version int) (*release.Release, []string, error) {
	if err := f.call("MarkRevision", ""); err != nil {
		return nil, nil, err
	}
	return f.Owners.MarkRevision(ctx, s, name, version)
}

func (f *fakeHelm) LetGo(ctx context.Context, s helm.Scope, name string) (int, error) {
	if err := f.call("LetGo", ""); err != nil {
		return 0, err
	}
	return f.Owners.LetGo(ctx, s, name)
}

func (f *fakeHelm) KeepFailed(ctx context.Context, s helm.Scope, name string, maxHistory int) (*release.Release, error) {
	if err := f.call("KeepFailed", ""); err != nil {
		return nil, err
	}
	return f.Actions.KeepFailed(ctx, s, name, maxHistory)
}

func (f *fakeHelm) Unlock(ctx context.Context, s helm.Scope, rel *release.Release) (*release.Release, bool, error) {
	if err := f.call("Unlock", " %d", rel.Version); err != nil {
		return nil, false, err
	}
	return f.Records.Unlock(ctx, s, rel)
}

// Test fails every test hook with testErr (the hooks' Pods failed).
func (f *fakeHelm) Test(ctx context.Context, s helm.Scope, name string, timeout time.Duration) (*release.Release, error) {
	if err := f.call("Test", ""); err != nil {
		return nil, err
	}
	f.Kube.WatchUntilReadyError = f.testErr
	defer func() { f.Kube.WatchUntilReadyError = nil }()
	return f.Actions.Test(ctx, s, name, timeout)
}

func (f *fakeHelm) Supersede(ctx context.Context, s helm.Scope, name string) ([]int, error) {
	if err := f.call("Supersede", ""); err != nil {
		return nil, err
	}
	return f.Records.Supersede(ctx, s, name)
}

func (f *fakeHelm) Writer(s helm.Scope) (client.Client, error) {
	if err := f.call("Writer", ""); err != nil {
		return nil, err
	}
	return f.Objects.Writer(s)
}

func (f *fakeHelm) Relabel(ctx context.Context, s helm.Scope, name string, keys []string, want map[string]string) error {
	if err := f.call("Relabel", " %s", machine.DescribeLabels(keys, want)); err != nil {
		return err
	}
	return f.Records.Relabel(ctx, s, name, keys, want)
}

// WriteFacts is a write of storage, not an action: it is not among the calls the decision
// table compares, and counted apart (factWrites).
func (f *fakeHelm) WriteFacts(ctx context.Context, s helm.Scope, name string, version int, facts records.Facts) error {
	f.mu.Lock()
	f.factWrites++
	err := f.factsErr
	f.mu.Unlock()
	if err != nil {
		return err
	}
	return f.Records.WriteFacts(ctx, s, name, version, facts)
}
