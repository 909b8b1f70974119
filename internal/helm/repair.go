package helm

import (
	"context"

	"github.com/rudder-operator/rudder/internal/records"
	view "github.com/rudder-operator/rudder/internal/release"
)

// The repairs of a release's history that no Helm action makes: a revision whose operation
// died unlocked, and more than one deployed revision settled.

// Unlock marks a revision stuck in a pending-* state (its operation died with a previous
// process) as failed, so that Helm accepts new actions on the release; a revision storage no
// longer holds pending is returned as it is (records.Unlock).
func (rs *Records) Unlock(ctx context.Context, s Scope, v *view.Release) (*view.Release, bool, error) {
	c := rs.core
	st, err := c.storageOf(ctx, s)
	if err != nil {
		return nil, false, err
	}
	rel, unlocked, err := records.Unlock(st, helmRelease(v))
	return View(rel), unlocked, err
}

// Supersede marks every deployed revision of a release but the newest superseded, and returns
// the revisions it marked: the repair of a history an upgrade or rollback left with more than
// one deployed revision (see run.settle), whoever's it was.
func (rs *Records) Supersede(ctx context.Context, s Scope, name string) ([]int, error) {
	c := rs.core
	st, err := c.storageOf(ctx, s)
	if err != nil {
		return nil, err
	}
	return records.SupersedeOlder(st, name)
}
