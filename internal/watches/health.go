package watches

import (
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/rudder-operator/rudder/internal/health"
)

// A watch's healthChecks judge the objects of kinds kstatus cannot (a custom resource whose
// readiness is status.phase): CEL expressions per apiVersion and kind, compiled when the
// watch loads (internal/health), evaluated instead of kstatus for those kinds.

func (c completing) compileHealth() error {
	h, err := health.Compile("healthChecks", c.w.HealthChecks)
	c.w.health = h
	return err
}

// Health is the watch's healthChecks, compiled (nil: none; a nil Checker judges no kind): they
// judge the objects of the kinds they name instead of kstatus.
func (w *Watch) Health() *health.Checker { return w.health }

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
