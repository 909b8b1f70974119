package helm

import (
	"fmt"
	"maps"
	"strconv"
	"sync/atomic"

	"helm.sh/helm/v3/pkg/release"
	"helm.sh/helm/v3/pkg/storage/driver"
)

// checkedDriver is a scope's release storage for one action: a revision is checked against
// the scope before it is stored. Storing the new revision is the first write of an install,
// an upgrade and a rollback, before any hook runs or object is applied, and the revision holds
// every hook of every event.
//
// It also notes whether an update of a record failed: Helm's upgrade and rollback log such a
// failure and go on (see run.settle).
type checkedDriver struct {
	// Driver is the storage: a namespace's Secrets (secretsDriver), or Helm's memory driver
	// (Memory).
	driver.Driver
	storing
	check func(*release.Release) error
	// marker marks the hooks of every revision the action stores or reads, so that every hook
	// Helm creates for it carries the owner's marks (nil: no owner, nothing is applied).
	marker *hookMarker
	lost   atomic.Bool
}

func (d *checkedDriver) Get(key string) (*release.Release, error) {
	rls, err := d.Driver.Get(key)
	d.marker.markHooks(rls)
	return rls, err
}

func (d *checkedDriver) List(filter func(*release.Release) bool) ([]*release.Release, error) {
	rls, err := d.Driver.List(filter)
	for _, r := range rls {
		d.marker.markHooks(r)
	}
	return rls, err
}

func (d *checkedDriver) Query(labels map[string]string) ([]*release.Release, error) {
	rls, err := d.Driver.Query(labels)
	for _, r := range rls {
		d.marker.markHooks(r)
	}
	return rls, err
}

func (d *checkedDriver) Update(key string, rls *release.Release) error {
	err := d.Driver.Update(key, rls)
	if err != nil {
		d.lost.Store(true)
	}
	return err
}

func (d *checkedDriver) Create(key string, rls *release.Release) error {
	if d.revision != 0 && rls.Version != d.revision {
		return &UnavailableError{Err: fmt.Errorf("revision %d of %s was rendered as revision %d: its history moved on during the action",
			rls.Version, rls.Name, d.revision)}
	}
	if d.record != nil {
		rls.Chart = d.record
	}
	d.marker.markHooks(rls)
	if d.check != nil {
		if err := d.check(rls); err != nil {
			return err
		}
	}
	if d.stamp {
		labels := make(map[string]string, len(rls.Labels)+1)
		maps.Copy(labels, rls.Labels)
		labels[LabelRevision] = strconv.Itoa(rls.Version)
		rls.Labels = labels
	}
	if d.description != "" {
		rls.Info.Description = d.description
	}
	if d.rollback {
		labels := make(map[string]string, len(rls.Labels)+1)
		maps.Copy(labels, rls.Labels)
		labels[LabelRollbackRevision] = strconv.Itoa(rls.Version)
		rls.Labels = labels
	}
	return d.Driver.Create(key, rls)
}
