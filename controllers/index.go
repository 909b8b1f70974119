package controllers

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// ReleaseSecretIndex indexes the cached Helm release Secrets by release name (Helm's "name"
// label), so that a pass finds its release's revisions without matching the labels of every
// Secret in the namespace.
const ReleaseSecretIndex = "rudder.dev/helm-release-name"

// IndexReleaseSecrets registers ReleaseSecretIndex on the manager's cache. It must run before
// the manager starts.
func IndexReleaseSecrets(ctx context.Context, indexer client.FieldIndexer) error {
	return indexer.IndexField(ctx, &corev1.Secret{}, ReleaseSecretIndex, func(o client.Object) []string {
		l := o.GetLabels()
		if l["owner"] != "helm" || l["name"] == "" {
			return nil
		}
		return []string{l["name"]}
	})
}
