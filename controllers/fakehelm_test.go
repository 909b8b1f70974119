package controllers

import (
	"context"
	"fmt"
	"strconv"
	"sync"

	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/release"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rudder-operator/rudder/internal/helm"
)

// fakeHelm is a spy Releases over one release's history. Every stored revision is mirrored
// into a client as Helm's storage Secret labels, so that the reconciler's cache of release
// metadata sees what storage holds.
type fakeHelm struct {
	mu      sync.Mutex
	name    string
	ns      string
	history []*release.Release
	calls   []string
	mirror  client.Client
	// manifest is what every revision the fake makes renders; objects, when set, are what
	// Install and Upgrade report of its objects (helm.Request.Objects, which Helm's client
	// knows from its post-render).
	manifest string
	objects  []*unstructured.Unstructured

	// What the next actions do: a non-nil error fails them; stores says whether a failed
	// install or upgrade leaves a failed revision (Helm's apply errors do; refusals before
	// anything is stored, such as a confinement violation, do not).
	installErr, upgradeErr, rollbackErr, lastErr error
	stores                                       bool
	// failNth fails the Nth call (from 1) of a method (by name) with nthErr: a transient error
	// in the middle of a pass.
	failNth map[string]int
	nthErr  error
	counts  map[string]int
}

// nth counts a call of method and returns nthErr when it is the one failNth names.
func (f *fakeHelm) nth(method string) error {
	if f.counts == nil {
		f.counts = map[string]int{}
	}
	f.counts[method]++
	if n, ok := f.failNth[method]; ok && n == f.counts[method] {
		return f.nthErr
	}
	return nil
}

func (f *fakeHelm) record(call string, args ...any) {
	f.calls = append(f.calls, fmt.Sprintf(call, args...))
}

// Calls returns the calls made so far and forgets them.
func (f *fakeHelm) Calls() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	c := f.calls
	f.calls = nil
	return c
}

func (f *fakeHelm) newest() *release.Release {
	if len(f.history) == 0 {
		return nil
	}
	return f.history[len(f.history)-1]
}

// store appends a revision (and mirrors it).
func (f *fakeHelm) store(rel *release.Release) {
	rel.Version = 1
	if n := f.newest(); n != nil {
		rel.Version = n.Version + 1
	}
	f.history = append(f.history, rel)
	f.sync()
}

// sync mirrors the history into Secrets (labels only, as rudder's cache holds them).
func (f *fakeHelm) sync() {
	ctx := context.Background()
	old := &corev1.SecretList{}
	if err := f.mirror.List(ctx, old, client.InNamespace(f.ns), client.MatchingLabels{"owner": "helm", "name": f.name}); err != nil {
		panic(err)
	}
	for i := range old.Items {
		if err := f.mirror.Delete(ctx, &old.Items[i]); err != nil {
			panic(err)
		}
	}
	for _, rel := range f.history {
		l := map[string]string{"owner": "helm", "name": f.name, "version": strconv.Itoa(rel.Version), "status": rel.Info.Status.String()}
		for k, v := range rel.Labels {
			l[k] = v
		}
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: fmt.Sprintf("sh.helm.release.v1.%s.v%d", f.name, rel.Version), Labels: l}}
		if err := f.mirror.Create(ctx, s); err != nil {
			panic(err)
		}
	}
}

func (f *fakeHelm) revision(req *helm.Request, status release.Status, desc string) *release.Release {
	l := req.Labels()
	next := 1
	if n := f.newest(); n != nil {
		next = n.Version + 1
	}
	l[helm.LabelRevision] = strconv.Itoa(next)
	return &release.Release{Name: f.name, Namespace: f.ns, Labels: l, Manifest: f.manifest,
		Chart: &chart.Chart{Metadata: &chart.Metadata{Name: req.Chart.Name(), Version: req.Chart.Metadata.Version}},
		Info:  &release.Info{Status: status, Description: desc}}
}

func (f *fakeHelm) Last(_ helm.Scope, name string) (*release.Release, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.record("Last")
	if f.lastErr != nil {
		return nil, f.lastErr
	}
	if err := f.nth("Last"); err != nil {
		return nil, err
	}
	return f.newest(), nil
}

func (f *fakeHelm) LastDeployed(_ helm.Scope, _ string, before int) (*release.Release, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.record("LastDeployed")
	if err := f.nth("LastDeployed"); err != nil {
		return nil, err
	}
	for i := len(f.history) - 1; i >= 0; i-- {
		if r := f.history[i]; r.Version < before && (r.Info.Status == release.StatusDeployed || r.Info.Status == release.StatusSuperseded) {
			return r, nil
		}
	}
	return nil, nil
}

func (f *fakeHelm) Revision(_ helm.Scope, _ string, version int) (*release.Release, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.record("Revision %d", version)
	for _, r := range f.history {
		if r.Version == version {
			return r, nil
		}
	}
	return nil, nil
}

func (f *fakeHelm) Install(_ context.Context, req *helm.Request) (*release.Release, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.record("Install")
	if f.newest() != nil {
		return nil, helm.ErrNameInUse
	}
	if f.installErr != nil {
		if f.stores {
			f.store(f.revision(req, release.StatusFailed, "Release failed"))
		}
		return nil, f.installErr
	}
	rel := f.revision(req, release.StatusDeployed, req.Description)
	f.store(rel)
	req.Objects = f.objects
	return rel, nil
}

func (f *fakeHelm) Upgrade(_ context.Context, req *helm.Request) (*release.Release, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.record("Upgrade")
	if f.upgradeErr != nil {
		if f.stores {
			f.store(f.revision(req, release.StatusFailed, "Upgrade failed"))
		}
		return nil, f.upgradeErr
	}
	f.supersede()
	rel := f.revision(req, release.StatusDeployed, req.Description)
	f.store(rel)
	req.Objects = f.objects
	return rel, nil
}

func (f *fakeHelm) supersede() {
	for _, r := range f.history {
		if r.Info.Status == release.StatusDeployed {
			r.Info.Status = release.StatusSuperseded
		}
	}
}

// Rollback copies the target's labels, as Helm does.
func (f *fakeHelm) Rollback(_ helm.Scope, _ string, to, _ int, desc string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.record("Rollback %d", to)
	if f.rollbackErr != nil {
		return f.rollbackErr
	}
	var target *release.Release
	for _, r := range f.history {
		if r.Version == to {
			target = r
		}
	}
	if target == nil {
		return fmt.Errorf("release: not found")
	}
	f.supersede()
	l := map[string]string{}
	for k, v := range target.Labels {
		l[k] = v
	}
	l[helm.LabelRollbackRevision] = strconv.Itoa(f.newest().Version + 1) // as helm.Client marks rudder's rollbacks
	f.store(&release.Release{Name: f.name, Namespace: f.ns, Labels: l, Manifest: target.Manifest, Chart: target.Chart,
		Info: &release.Info{Status: release.StatusDeployed, Description: desc}})
	return nil
}

func (f *fakeHelm) Uninstall(_ helm.Scope, _, _ string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.record("Uninstall")
	f.history = nil
	f.sync()
	return nil
}

func (f *fakeHelm) Unlock(_ helm.Scope, rel *release.Release) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.record("Unlock %d", rel.Version)
	rel.Info.Status = release.StatusFailed
	f.sync()
	return nil
}

// Supersede marks every deployed revision but the newest superseded, as Helm's storage would.
func (f *fakeHelm) Supersede(helm.Scope, string) ([]int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.record("Supersede")
	var deployed []*release.Release
	for _, r := range f.history {
		if r.Info.Status == release.StatusDeployed {
			deployed = append(deployed, r)
		}
	}
	var marked []int
	for _, r := range deployed[:max(len(deployed)-1, 0)] {
		r.Info.Status = release.StatusSuperseded
		marked = append(marked, r.Version)
	}
	f.sync()
	return marked, nil
}

func (f *fakeHelm) Writer(helm.Scope) (client.Client, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.record("Writer")
	return f.mirror, nil
}

func (f *fakeHelm) Relabel(_ helm.Scope, _ string, keys []string, want map[string]string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.record("Relabel %s", describeLabels(keys, want))
	for _, r := range f.history {
		for _, k := range keys {
			delete(r.Labels, k)
		}
		for k, v := range want {
			r.Labels[k] = v
		}
	}
	f.sync()
	return nil
}
