package controllers

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

var secretGVK = corev1.SchemeGroupVersion.WithKind("Secret")

// ReleaseSecret is how the manager's cache holds Helm's release Secrets: metadata only. A pass
// needs the labels of the newest revision (status, owner, digests), never the release payload,
// so neither the watch nor the cache carries it.
func ReleaseSecret() *metav1.PartialObjectMetadata {
	m := &metav1.PartialObjectMetadata{}
	m.SetGroupVersionKind(secretGVK)
	return m
}

// ReleaseSecretIndex indexes the cached Helm release Secrets by release name (Helm's "name"
// label), so that a pass finds its release's revisions without matching the labels of every
// Secret in the namespace.
const ReleaseSecretIndex = "rudder.dev/helm-release-name"

// IndexReleaseSecrets registers ReleaseSecretIndex on the manager's cache. It must run before
// the manager starts.
func IndexReleaseSecrets(ctx context.Context, indexer client.FieldIndexer) error {
	return indexer.IndexField(ctx, ReleaseSecret(), ReleaseSecretIndex, func(o client.Object) []string {
		l := o.GetLabels()
		if l["owner"] != "helm" || l["name"] == "" {
			return nil
		}
		return []string{l["name"]}
	})
}
