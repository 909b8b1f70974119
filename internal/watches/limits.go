package watches

import (
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/rudder-operator/rudder/internal/helm"
)

// Limits is a watch's limits field: the bounds of each release, which keep one CR from
// flooding its namespace or holding rudder's workers. Unset fields keep helm.Limits' defaults.
type Limits struct {
	// MaxObjects is the most objects one release renders, manifest and hooks together
	// (default 1000).
	MaxObjects int `json:"maxObjects,omitempty"`
	// MaxManifestBytes is the largest rendered manifest, and the largest sum of the hooks'
	// manifests, as a quantity such as 4Mi (default 4Mi).
	MaxManifestBytes *resource.Quantity `json:"maxManifestBytes,omitempty"`
	// ActionTimeout is how long one Helm action may wait for its hooks (default 5m, Helm's).
	ActionTimeout *metav1.Duration `json:"actionTimeout,omitempty"`
	// RenderTimeout and RenderMemory bound one render of the chart, which runs in a worker
	// process (default 30s and 256Mi): a template that loops, recurses or allocates without
	// end fails its CR, and nothing else.
	RenderTimeout *metav1.Duration   `json:"renderTimeout,omitempty"`
	RenderMemory  *resource.Quantity `json:"renderMemory,omitempty"`
	// MaxActionsPerNamespace is how many of the kind's workers the CRs of one namespace may
	// hold in Helm actions at once (default: the workers, maxConcurrentReconciles); the other
	// CRs of that namespace wait their turn without holding a worker.
	MaxActionsPerNamespace int `json:"maxActionsPerNamespace,omitempty"`
	// MaxLookups is the most lookups one render may make (default 100).
	MaxLookups int `json:"maxLookups,omitempty"`
}

// helm is the Limits a release of the watch is held to.
func (l *Limits) helm() helm.Limits {
	if l == nil {
		return helm.Limits{}
	}
	out := helm.Limits{MaxObjects: l.MaxObjects, MaxLookups: l.MaxLookups}
	if l.MaxManifestBytes != nil {
		out.MaxManifestBytes = l.MaxManifestBytes.Value()
	}
	if l.ActionTimeout != nil {
		out.ActionTimeout = l.ActionTimeout.Duration
	}
	if l.RenderTimeout != nil {
		out.RenderTimeout = l.RenderTimeout.Duration
	}
	if l.RenderMemory != nil {
		out.RenderMemory = l.RenderMemory.Value()
	}
	return out
}

// ActionsPerNamespace is how many of workers the CRs of one namespace may hold in actions.
func (w *Watch) ActionsPerNamespace(workers int) int {
	if w.Limits != nil && w.Limits.MaxActionsPerNamespace > 0 {
		return w.Limits.MaxActionsPerNamespace
	}
	return workers
}
