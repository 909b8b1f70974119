package records

import (
	"context"
	"errors"
	"strconv"

	release "helm.sh/helm/v4/pkg/release/v1"
	"helm.sh/helm/v4/pkg/storage/driver"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// ForeignRecords selects the release records rudder did not make (Helm's, Flux's, another
// tool's): owner=helm without rudder's owner UID. A cache of them, beside the one of rudder's
// own, lets an install's check that its name is free be answered without a request.
func ForeignRecords() labels.Selector {
	owner, _ := labels.NewRequirement("owner", selection.Equals, []string{"helm"})
	notOurs, _ := labels.NewRequirement(LabelOwnerUID, selection.DoesNotExist, nil)
	return labels.NewSelector().Add(*owner, *notOurs)
}

// query is Query's answer (see QueryMode).
func (d *Driver) query(want map[string]string) ([]*release.Release, error) {
	name := want["name"]
	if d.mode == QueryHelm || d.own == nil || name == "" || want["owner"] != "helm" {
		return V1sOf(d.Secrets.Query(want))
	}
	own, err := cachedRecords(d.own, d.namespace, name)
	if err != nil {
		return V1sOf(d.Secrets.Query(want))
	}
	if d.mode == QueryInstall {
		if d.foreign == nil || len(own) > 0 {
			return V1sOf(d.Secrets.Query(want))
		}
		foreign, err := cachedRecords(d.foreign, d.namespace, name)
		if err != nil || len(foreign) > 0 {
			return V1sOf(d.Secrets.Query(want))
		}
		return nil, driver.ErrReleaseNotFound
	}
	if len(own) == 0 {
		return V1sOf(d.Secrets.Query(want))
	}
	return d.readThrough(name, own, want)
}

// Newest is the newest revision of release name, read by name: the newest revision the cache
// of rudder's records shows, then each revision after it until one is not there (revisions are
// numbered in order: those the cache has not seen yet are these). One GET when the cache is
// current, whatever the history's length, and never a LIST, whose cost grows with every
// Secret of the namespace. ok is false, with nothing read, when the cache shows no record of
// the name or the driver has no cache, and when the newest it shows is gone (an uninstall):
// the caller asks storage instead.
func (d *Driver) Newest(name string) (rel *release.Release, ok bool, err error) {
	if d.own == nil || name == "" {
		return nil, false, nil
	}
	cached, err := cachedRecords(d.own, d.namespace, name)
	if err != nil {
		return nil, false, nil
	}
	newest := 0
	for i := range cached {
		if v, err := strconv.Atoi(cached[i].Labels["version"]); err == nil {
			newest = max(newest, v)
		}
	}
	if newest == 0 {
		return nil, false, nil
	}
	rel, err = V1Of(d.Get(RecordName(name, newest)))
	switch {
	case errors.Is(err, driver.ErrReleaseNotFound):
		return nil, false, nil
	case err != nil:
		return nil, false, err
	}
	for v := newest + 1; ; v++ {
		next, err := V1Of(d.Get(RecordName(name, v)))
		switch {
		case errors.Is(err, driver.ErrReleaseNotFound):
			return rel, true, nil
		case err != nil:
			return nil, false, err
		}
		rel = next
	}
}

// readThrough reads the records of release name with labels want: those of cached (their
// metadata, from the cache) that have them, then every revision after the newest of cached,
// until one is not there.
func (d *Driver) readThrough(name string, cached []metav1.PartialObjectMetadata, want map[string]string) ([]*release.Release, error) {
	var out []*release.Release
	newest := 0
	sel := labels.SelectorFromSet(want)
	for i := range cached {
		l := cached[i].Labels
		if v, err := strconv.Atoi(l["version"]); err == nil {
			newest = max(newest, v)
		}
		if !sel.Matches(labels.Set(l)) {
			continue
		}
		rel, err := V1Of(d.Get(cached[i].Name))
		switch {
		case errors.Is(err, driver.ErrReleaseNotFound):
			continue // deleted since the cache saw it
		case err != nil:
			return nil, err
		}
		out = append(out, rel)
	}
	for v := newest + 1; ; v++ {
		rel, err := V1Of(d.Get(RecordName(name, v)))
		if errors.Is(err, driver.ErrReleaseNotFound) {
			break
		}
		if err != nil {
			return nil, err
		}
		if releaseHas(rel, want) {
			out = append(out, rel)
		}
	}
	if len(out) == 0 {
		return nil, driver.ErrReleaseNotFound
	}
	return out, nil
}

// cachedRecords are the release records of release name in namespace ns that cache c holds
// (ReleaseSecretIndex indexes release records only).
func cachedRecords(c client.Reader, ns, name string) ([]metav1.PartialObjectMetadata, error) {
	list := &metav1.PartialObjectMetadataList{}
	list.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("SecretList"))
	if err := c.List(context.Background(), list, client.InNamespace(ns), client.MatchingFields{ReleaseSecretIndex: name},
		client.UnsafeDisableDeepCopy); err != nil {
		return nil, err
	}
	return list.Items, nil
}

// releaseHas reports whether rel, as Helm's Get returns it (without the labels name, owner,
// status and version, which are its own fields), has the labels want.
func releaseHas(rel *release.Release, want map[string]string) bool {
	for k, v := range want {
		var got string
		switch k {
		case "name":
			got = rel.Name
		case "owner":
			got = "helm"
		case "status":
			if rel.Info != nil {
				got = rel.Info.Status.String()
			}
		case "version":
			got = strconv.Itoa(rel.Version)
		default:
			got = rel.Labels[k]
		}
		if got != v {
			return false
		}
	}
	return true
}
