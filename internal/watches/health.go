package watches

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"

	"github.com/rudder-operator/rudder/internal/health"
)

// A watch's healthChecks judge the objects of kinds kstatus cannot (a custom resource whose
// readiness is status.phase): CEL expressions per apiVersion and kind, compiled when the
// watch loads (internal/health), evaluated instead of kstatus for those kinds.

func (w loading) compileHealth() error {
	c, err := health.Compile("healthChecks", w.HealthChecks)
	w.health = c
	return err
}

// Judges reports whether the watch's healthChecks judge objects of gvk.
func (w *Watch) Judges(gvk schema.GroupVersionKind) bool { return w.health.Judges(gvk) }

// Health is the verdict of the watch's health check on obj, of kind gvk; ok is false when the
// watch has none for the kind (kstatus judges it).
func (w *Watch) Health(gvk schema.GroupVersionKind, obj map[string]any) (verdict status.Status, msg string, ok bool) {
	return w.health.Status(gvk, obj)
}

// JudgedKinds are the kinds the healthChecks of ws judge: the operand cache keeps their
// objects' spec and status for the checks to read.
func JudgedKinds(ws []*Watch) map[schema.GroupVersionKind]bool {
	out := map[schema.GroupVersionKind]bool{}
	for _, w := range ws {
		for _, gvk := range w.health.Kinds() {
			out[gvk] = true
		}
	}
	return out
}
