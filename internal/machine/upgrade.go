package machine

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"

	rstatus "github.com/rudder-operator/rudder/api/status"
	"github.com/rudder-operator/rudder/internal/helm"
	"github.com/rudder-operator/rudder/internal/plan"
)

// upgrade makes a new revision from the spec and chart (records.StateOutOfSync, or a failed
// newest revision with a deployed one before it), with the request the actor prepared.
type upgrade struct{ prepared }

func (upgrade) name() plan.Action { return plan.Upgrade }

func (a upgrade) run(ctx context.Context, e *env, obs observed) result {
	if a.stop != nil {
		return *a.stop
	}
	req, pre := a.req, a.pre
	if obs.head != nil {
		req.Revision = obs.head.Revision + 1
	}
	rel, err := e.helm.Actions.Upgrade(ctx, req)
	var res result
	if err == nil {
		res = e.madeRevision(req, rel, rstatus.ReasonUpgradeSucceeded, "Upgrade", fmt.Sprintf("upgraded to revision %d: %s", rel.Version,
			req.Description))
		for _, obj := range req.Replaced {
			res.notes = append(res.notes, note{corev1.EventTypeNormal, rstatus.ReasonReplaced, "Upgrade",
				fmt.Sprintf("replaced %s (deleted and created) in revision %d: its update changes an immutable field (upgrade.force)", obj,
					rel.Version)})
		}
	} else {
		res = e.releaseFailed("Upgrade", "upgrading", rstatus.ReasonUpgradeFailed, err)
	}
	res.notes, res.call = append(append(pre, requestNotes(req)...), res.notes...), callOf(err)
	return res
}

// requestNotes are the Events of what an install or upgrade did with the chart's crds/, and of
// what its render's lookups were not let read.
func requestNotes(req *helm.Request) []note {
	var out []note
	if len(req.CRDsApplied) > 0 {
		out = append(out, note{corev1.EventTypeNormal, rstatus.ReasonCRDsApplied, "CRDs", "crds/: " + strings.Join(req.CRDsApplied, ", ")})
	}
	if len(req.Withheld) > 0 {
		out = append(out, note{corev1.EventTypeWarning, rstatus.ReasonLookupWithheld, "Lookup",
			"the render's lookups read as not found: " + strings.Join(req.Withheld, "; ")})
	}
	return out
}
