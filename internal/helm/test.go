package helm

import (
	"context"
	"slices"
	"time"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/release"
)

// Test runs the test hooks of a release's newest revision (`helm test`), as the scope's
// identity and within its confinement like every action: Helm creates each hook, waits for it
// within timeout, records how it ran in the revision's record, and deletes it as its
// helm.sh/hook-delete-policy says. The revision it returns says how each hook ran (see
// Tests); the error is Helm's, and a test that failed is one.
func (c *Client) Test(ctx context.Context, s Scope, name string, timeout time.Duration) (*release.Release, error) {
	r, err := c.begin(ctx, s, storing{manifest: true})
	if err != nil {
		return nil, err
	}
	return runTests(r.conf, s, name, timeout, r.result)
}

func runTests(conf *action.Configuration, s Scope, name string, timeout time.Duration, result func(error) error) (*release.Release, error) {
	rt := action.NewReleaseTesting(conf)
	rt.Namespace = s.Namespace
	rt.Timeout = timeout
	rel, err := rt.Run(name)
	return rel, result(err)
}

// Tests names the test hooks of a revision that ran, and those that failed.
func Tests(rel *release.Release) (ran, failed []string) {
	if rel == nil {
		return nil, nil
	}
	for _, h := range rel.Hooks {
		if !slices.Contains(h.Events, release.HookTest) || h.LastRun.Phase == release.HookPhaseUnknown {
			continue
		}
		ran = append(ran, h.Name)
		if h.LastRun.Phase == release.HookPhaseFailed {
			failed = append(failed, h.Name)
		}
	}
	return ran, failed
}

// Test runs the release's test hooks on Helm's fake kube client: each succeeds unless
// Kube.WatchUntilReadyError fails it.
func (m *Memory) Test(_ context.Context, s Scope, name string, timeout time.Duration) (*release.Release, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return runTests(m.config(s.Namespace, storing{}), s, name, timeout, func(err error) error { return err })
}
