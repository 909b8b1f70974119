package helm

import (
	"errors"

	"github.com/go-logr/logr"
	"helm.sh/helm/v4/pkg/action"
	release "helm.sh/helm/v4/pkg/release/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/client-go/rest"

	"github.com/rudder-operator/rudder/internal/guard"
	"github.com/rudder-operator/rudder/internal/records"
)

// One action as the Client runs it: its configuration, its guard, and how it ends.

// run is one action's configuration, with the guard its requests go through.
type run struct {
	conf  *action.Configuration
	guard *guard.Guard
	// config is the action's identity with its guard: what its own requests (ownership reads,
	// kept hooks' deletion) go through.
	config  *rest.Config
	scope   Scope
	kube    *kubeClient
	records *checkedDriver
	log     logr.Logger
}

// postRenderer is the post-renderer of an install or upgrade of the run.
func (r *run) postRenderer(req *Request, mapper meta.RESTMapper) *postRenderer {
	pr := req.postRenderer(mapper)
	r.kube.post = pr
	return pr
}

// made reports, in req.Objects, the identities of the revision the run's install or upgrade
// made, as its post-renderer wrote them, and in req.Rendered the objects whole; nil when the
// action failed.
func (r *run) made(req *Request, rel *release.Release, err error) {
	req.Objects, req.Rendered = nil, nil
	if err == nil {
		req.Objects, req.Rendered = r.kube.post.made(), r.kube.post.rendered()
	}
}

// settle completes the history of a release whose upgrade or rollback succeeded (err nil)
// although an update of one of its records failed: Helm logs a failed update of the revision
// it replaces, and goes on, which leaves that revision marked deployed next to the new one (an
// API server or etcd outage in the middle of the action does it). Every deployed revision but
// the newest is then marked superseded, as Helm's rollback does. The action's result stays
// its own: when this repair fails too, the reconciler's next pass makes it (see
// Head.OlderDeployed). An action that failed is left as it is; its revisions are what the
// next pass decides from.
func (r *run) settle(name string, err error) {
	if err != nil || !r.records.lost.Load() {
		return
	}
	marked, err := records.SupersedeOlder(r.conf.Releases, name)
	if err != nil {
		r.log.Error(err, "an update of the release's records failed during the action; its older deployed revisions are left for the next pass",
			"release", name)
		return
	}
	if len(marked) > 0 {
		r.log.Info("an update of the release's records failed during the action; marked its older deployed revisions superseded", "release",
			name, "revisions", marked)
	}
}

// result says why an action failed, from what its guard saw when Helm's error does not (the
// template engine keeps only the text of a lookup's error).
func (r *run) result(err error) error {
	if err == nil {
		return nil
	}
	refused, forbidden := r.guard.Outcome()
	if ce := (*guard.ConfinementError)(nil); len(refused) > 0 && !errors.As(err, &ce) {
		return &guard.ConfinementError{Violations: refused}
	}
	if fe := (*ForbiddenError)(nil); len(forbidden) > 0 && !errors.As(err, &fe) {
		return &ForbiddenError{User: r.scope.User(), Refused: forbidden, Err: err}
	}
	if r.guard.SawUnavailable(err.Error()) {
		return &UnavailableError{Err: err}
	}
	return err
}
