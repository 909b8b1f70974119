package records

import (
	"context"
	"slices"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rudder-operator/rudder/internal/release"
)

// Helm's release storage Secrets, as a controller-runtime cache holds them. What rudder reads
// of a release on every pass is the newest revision's labels (status, owner, digests); the
// payload is read from storage only when an action needs it.

var secretGVK = corev1.SchemeGroupVersion.WithKind("Secret")

// ReleaseSecret is how a cache holds release Secrets: metadata only, so that neither the watch
// nor the cache carries the release payloads.
func ReleaseSecret() *metav1.PartialObjectMetadata {
	m := &metav1.PartialObjectMetadata{}
	m.SetGroupVersionKind(secretGVK)
	return m
}

// ReleaseSecretIndex indexes cached release Secrets by release name (Helm's "name" label), so
// that a release's revisions are found without matching the labels of every Secret in the
// namespace.
const ReleaseSecretIndex = "rudder.dev/helm-release-name"

// IndexReleaseSecrets registers ReleaseSecretIndex on a cache. It must run before the cache
// starts.
func IndexReleaseSecrets(ctx context.Context, indexer client.FieldIndexer) error {
	return indexer.IndexField(ctx, ReleaseSecret(), ReleaseSecretIndex, ReleaseNameOf)
}

// ReleaseNameOf is ReleaseSecretIndex's value for a Secret: its release's name, if it is a
// release record.
func ReleaseNameOf(o client.Object) []string {
	l := o.GetLabels()
	if !IsReleaseRecord(l) || l["name"] == "" {
		return nil
	}
	return []string{l["name"]}
}

// IsReleaseRecord reports whether a Secret's labels are those of a Helm release record that
// rudder's storage may have written: owner=helm, and not the managed label every object a
// chart renders carries (see storedRecords).
func IsReleaseRecord(labels map[string]string) bool {
	return labels["owner"] == "helm" && labels[LabelManaged] == ""
}

// CachedHead reads the newest revision of release name in namespace ns from a cache that
// holds release Secrets as ReleaseSecret and indexes them with IndexReleaseSecrets: no API
// call, no decoding. nil: the cache holds no revision.
//
// What this process wrote of the release's records since the cache last showed them (w; nil:
// nothing) is read in place of the cache's older view: see Written.
func CachedHead(ctx context.Context, c client.Reader, w *Written, ns, name string) (*Head, error) {
	list := &metav1.PartialObjectMetadataList{}
	list.SetGroupVersionKind(secretGVK.GroupVersion().WithKind("SecretList"))
	// Read-only use of the labels: no copies.
	if err := c.List(ctx, list, client.InNamespace(ns), client.MatchingFields{ReleaseSecretIndex: name},
		client.UnsafeDisableDeepCopy); err != nil {
		return nil, err
	}
	recs := w.overlay(ns, name, list.Items)
	heads := make([]*Head, 0, len(recs))
	for _, l := range recs {
		if h := HeadOfLabels(l); h != nil {
			heads = append(heads, h)
		}
	}
	return NewestHead(heads), nil
}

// NewestHead is the newest of a release's revisions, with the older ones still marked
// deployed next to a deployed newest one, and the release's facts: the newest that a record
// carries as its own (nil: none).
func NewestHead(heads []*Head) *Head {
	var best *Head
	deployed := 0
	for _, h := range heads {
		if h.Status == release.StatusDeployed {
			deployed++
		}
		if best == nil || h.Revision > best.Revision {
			best = h
		}
	}
	if best != nil && best.Status == release.StatusDeployed && deployed > 1 {
		for _, h := range heads {
			if h.Status == release.StatusDeployed && h.Revision != best.Revision {
				best.OlderDeployed = append(best.OlderDeployed, h.Revision)
			}
		}
		slices.Sort(best.OlderDeployed)
	}
	if best != nil && best.Facts == nil {
		var from *Head
		for _, h := range heads {
			if h.Facts != nil && h.Revision < best.Revision && (from == nil || h.Revision > from.Revision) {
				from = h
			}
		}
		if from != nil {
			f := *from.Facts
			best.Facts = &f
		}
	}
	return best
}
