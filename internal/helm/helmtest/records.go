package helmtest

import (
	"context"
	"errors"
	"maps"
	"strings"

	release "helm.sh/helm/v4/pkg/release/v1"
	"helm.sh/helm/v4/pkg/storage/driver"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rudder-operator/rudder/internal/helm"
	"github.com/rudder-operator/rudder/internal/records"
	view "github.com/rudder-operator/rudder/internal/release"
)

// The views of a Memory that write its records apart from an action: owners, records, objects.

// LetGo is helm.Owners.LetGo over the memory storage, which holds no objects: every record of the
// release loses rudder's labels.
func (o *MemoryOwners) LetGo(_ context.Context, s helm.Scope, name string) (int, error) {
	m := o.m
	m.mu.Lock()
	defer m.mu.Unlock()
	st := m.storage(s.Namespace, helm.Marks{})
	hist, err := records.V1sOf(st.History(name))
	if errors.Is(err, driver.ErrReleaseNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	for _, rel := range hist {
		for k := range rel.Labels {
			if strings.HasPrefix(k, records.LabelPrefix) {
				delete(rel.Labels, k)
			}
		}
		if err := st.Update(rel); err != nil {
			return 0, err
		}
	}
	return 0, nil
}

// ProveForeign over the memory storage, which holds no objects: nothing proves a release.
func (*MemoryOwners) ProveForeign(context.Context, helm.Scope, string) (*helm.Proof, error) {
	return &helm.Proof{Why: "the memory storage holds no objects to prove it"}, nil
}

// AdoptForeign over the memory storage: nothing is ever proven to it.
func (*MemoryOwners) AdoptForeign(context.Context, helm.Scope, string, *helm.Proof, map[string]string) error {
	return errors.New("the memory storage adopts nothing")
}

// MarkRevision over the memory storage, which holds no objects: there is nothing to mark,
// and the revision is as stored.
func (o *MemoryOwners) MarkRevision(_ context.Context, s helm.Scope, name string, version int) (*view.Release, []string, error) {
	m := o.m
	m.mu.Lock()
	defer m.mu.Unlock()
	rel, err := viewOf(records.Revision(m.storage(s.Namespace, helm.Marks{}), name, version))
	return rel, nil, err
}

func (rs *MemoryRecords) Unlock(_ context.Context, s helm.Scope, v *view.Release) (*view.Release, bool, error) {
	m := rs.m
	m.mu.Lock()
	defer m.mu.Unlock()
	var rel *release.Release
	if v != nil {
		rel, _ = v.Source.(*release.Release)
	}
	now, unlocked, err := records.Unlock(m.storage(s.Namespace, helm.Marks{}), rel)
	return helm.View(now), unlocked, err
}

func (rs *MemoryRecords) Supersede(_ context.Context, s helm.Scope, name string) ([]int, error) {
	m := rs.m
	m.mu.Lock()
	defer m.mu.Unlock()
	return records.SupersedeOlder(m.storage(s.Namespace, helm.Marks{}), name)
}

func (ob *MemoryObjects) Writer(helm.Scope) (client.Client, error) {
	m := ob.m
	if m.Client == nil {
		return nil, errors.New("memory helm: no writer")
	}
	return m.Client, nil
}

// Relabel gives every record of the release exactly the carried labels want among keys.
func (rs *MemoryRecords) Relabel(_ context.Context, s helm.Scope, name string, keys []string, want map[string]string) error {
	m := rs.m
	m.mu.Lock()
	defer m.mu.Unlock()
	st := m.storage(s.Namespace, helm.Marks{})
	hist, err := records.V1sOf(st.History(name))
	if err != nil {
		return err
	}
	for _, r := range hist {
		if helm.CarriedMatch(keys, want, r.Labels) {
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

// WriteFacts gives the record of revision version exactly the facts f.
func (rs *MemoryRecords) WriteFacts(_ context.Context, s helm.Scope, name string, version int, f records.Facts) error {
	m := rs.m
	m.mu.Lock()
	defer m.mu.Unlock()
	st := m.storage(s.Namespace, helm.Marks{})
	r, err := records.V1Of(st.Get(name, version))
	if err != nil {
		return err
	}
	for _, k := range records.FactLabels {
		delete(r.Labels, k)
	}
	if r.Labels == nil {
		r.Labels = map[string]string{}
	}
	maps.Copy(r.Labels, f.Labels(version))
	return st.Update(r)
}
