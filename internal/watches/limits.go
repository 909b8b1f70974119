package watches

import (
	"github.com/rudder-operator/rudder/internal/helm"
)

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

// ActionsPerNamespace is how many of workers the CRs of one namespace may hold in actions
// (l may be nil: the watch sets no limits).
func (l *Limits) ActionsPerNamespace(workers int) int {
	if l != nil && l.MaxActionsPerNamespace > 0 {
		return l.MaxActionsPerNamespace
	}
	return workers
}
