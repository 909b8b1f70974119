package controllers

import (
	"context"
	"fmt"

	rstatus "github.com/rudder-operator/rudder/api/status"
)

// upgrade makes a new revision from the spec and chart (helm.StateOutOfSync, or a failed
// newest revision with a deployed one before it).
type upgrade struct{}

func (upgrade) String() string { return actUpgrade }

func (upgrade) run(ctx context.Context, p *pass, obs observed) result {
	req, pre, stop := p.request(actUpgrade)
	if stop != nil {
		return *stop
	}
	if obs.head != nil {
		req.Revision = obs.head.Revision + 1
	}
	rel, err := p.r.opts.Helm.Upgrade(ctx, req)
	var res result
	if err == nil {
		releaseActions.WithLabelValues(p.r.gvkLabel(), actUpgrade, "ok").Inc()
		res = p.madeRevision(req, rel, rstatus.ReasonUpgradeSucceeded, "Upgrade", fmt.Sprintf("upgraded to revision %d: %s", rel.Version, req.Description))
	} else {
		releaseActions.WithLabelValues(p.r.gvkLabel(), actUpgrade, "failed").Inc()
		res = p.releaseFailed("Upgrade", "upgrading", rstatus.ReasonUpgradeFailed, err)
	}
	res.notes = append(pre, res.notes...)
	return res
}
