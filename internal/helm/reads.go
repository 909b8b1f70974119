package helm

import (
	"context"
	"errors"

	hrelease "helm.sh/helm/v4/pkg/release"
	release "helm.sh/helm/v4/pkg/release/v1"
	"helm.sh/helm/v4/pkg/storage"
	corev1 "k8s.io/client-go/kubernetes/typed/core/v1"

	"github.com/rudder-operator/rudder/internal/records"
	view "github.com/rudder-operator/rudder/internal/release"
)

// The reads of release storage: each returns rudder's view of a revision (View), or the
// newest revision's Head from the cache of records.

// Last is the newest revision of a release, or nil when there is none: read by name from the
// newest revision the cache of rudder's records shows (records.Driver.Newest), else from
// storage (Helm's LIST of the release's records).
func (h *History) Last(ctx context.Context, s Scope, name string) (*view.Release, error) {
	c := h.core
	d, err := c.driver(s)
	if err != nil {
		return nil, err
	}
	d = d.WithContext(ctx)
	if c.records != nil {
		if rel, ok, err := d.WithQueries(records.QueryUpgrade, s.Namespace, c.records, c.foreign).Newest(name); ok || err != nil {
			return View(rel), err
		}
	}
	st := storage.Init(d)
	st.SetLogger(d.Logger().Handler())
	return viewOf(records.Last(st, name))
}

// Revision is one revision of a release, or nil when the history holds no such revision.
func (h *History) Revision(ctx context.Context, s Scope, name string, version int) (*view.Release, error) {
	c := h.core
	st, err := c.storageOf(ctx, s)
	if err != nil {
		return nil, err
	}
	return viewOf(records.Revision(st, name, version))
}

// LastDeployed is the newest revision before before whose status is deployed or superseded
// (the one a rollback returns to), or nil.
func (h *History) LastDeployed(ctx context.Context, s Scope, name string, before int) (*view.Release, error) {
	c := h.core
	st, err := c.storageOf(ctx, s)
	if err != nil {
		return nil, err
	}
	return viewOf(records.LastDeployed(st, name, before))
}

// Head is the newest revision of a release as the cache of release records shows it, with what
// this client wrote that the cache does not show yet (records.CachedHead, records.Written): no
// API call, no decoding. nil: none. It fails when the Client was made without a cache.
func (h *History) Head(ctx context.Context, s Scope, name string) (*records.Head, error) {
	c := h.core
	if c.records == nil {
		return nil, errors.New("helm client: no cache of release records")
	}
	return records.CachedHead(ctx, c.records, c.written, s.Namespace, name)
}

// ReadLast is the newest revision of release name as Helm stored it in secrets (its
// namespace's Secrets), or nil when there is none: a read of storage by a client of its own
// (`rudder diff --cluster`), with no cache of records.
func ReadLast(secrets corev1.SecretInterface, name string) (*view.Release, error) {
	return viewOf(records.Last(storage.Init(records.NewDriver(secrets)), name))
}

// ReadHistory is every revision of release name as secrets hold it, oldest first (none:
// nil), for the command line's `rudder history`.
func ReadHistory(secrets corev1.SecretInterface, name string) ([]*view.Release, error) {
	hist, err := records.History(storage.Init(records.NewDriver(secrets)), name)
	if err != nil {
		return nil, err
	}
	out := make([]*view.Release, len(hist))
	for i, r := range hist {
		out[i] = View(r)
	}
	return out, nil
}

// appliesServerSide reports whether revision version of release name (0: the newest) was
// applied server-side, as its record says (Helm 4's apply_method; none: client-side, as every
// record Helm 3 wrote). An action that follows the release's method (an upgrade, a rollback to
// that revision, a test) creates as it says (kubeClient.Create).
func (r *run) appliesServerSide(name string, version int) bool {
	var rel hrelease.Releaser
	var err error
	if version == 0 {
		rel, err = r.conf.Releases.Last(name)
	} else {
		rel, err = r.conf.Releases.Get(name, version)
	}
	v, verr := records.V1(rel)
	return err == nil && verr == nil && v != nil && v.ApplyMethod == string(release.ApplyMethodServerSideApply)
}
