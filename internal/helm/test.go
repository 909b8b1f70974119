package helm

import (
	"context"
	"time"

	"helm.sh/helm/v4/pkg/action"
	release "helm.sh/helm/v4/pkg/release/v1"

	"github.com/rudder-operator/rudder/internal/records"
	view "github.com/rudder-operator/rudder/internal/release"
)

// Test runs the test hooks of a release's newest revision (`helm test`), as the scope's
// identity and within its confinement like every action: Helm creates each hook, waits for it
// within timeout, records how it ran in the revision's record, and deletes it as its
// helm.sh/hook-delete-policy says. The revision it returns says how each hook ran (see
// Tests); the error is Helm's, and a test that failed is one.
func (c *Client) Test(ctx context.Context, s Scope, name string, timeout time.Duration) (*view.Release, error) {
	r, err := c.begin(ctx, s, storing{manifest: true, testing: true})
	if err != nil {
		return nil, err
	}
	rt := action.NewReleaseTesting(r.conf)
	rt.Namespace = s.Namespace
	rt.Timeout = timeout
	r.kube.serverSide = r.appliesServerSide(name, 0)
	rel, err := RunTests(rt, name)
	return View(rel), r.result(err)
}

// RunTests runs Helm's test action on release name and returns the revision it ran, which says
// how each test hook ran. Helm 4 leaves the hooks' deletion (their delete policies) to the
// caller, for it to read their logs first: rudder reads none, and deletes them at once.
func RunTests(rt *action.ReleaseTesting, name string) (*release.Release, error) {
	rel, shutdown, err := rt.Run(name)
	if serr := shutdown(); err == nil {
		err = serr
	}
	return records.V1Of(rel, err)
}

// Tests names the test hooks of a revision that ran, and those that failed.
func Tests(rel *view.Release) (ran, failed []string) {
	if rel == nil {
		return nil, nil
	}
	for _, h := range rel.Hooks {
		if !h.HasEvent(string(release.HookTest)) || h.LastRun.Phase == "" || h.LastRun.Phase == string(release.HookPhaseUnknown) {
			continue
		}
		ran = append(ran, h.Name)
		if h.LastRun.Phase == string(release.HookPhaseFailed) {
			failed = append(failed, h.Name)
		}
	}
	return ran, failed
}
