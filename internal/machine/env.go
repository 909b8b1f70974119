package machine

import (
	"context"
	"errors"
	"fmt"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	rstatus "github.com/rudder-operator/rudder/api/status"
	"github.com/rudder-operator/rudder/internal/helm"
	"github.com/rudder-operator/rudder/internal/plan"
	"github.com/rudder-operator/rudder/internal/records"
	"github.com/rudder-operator/rudder/internal/release"
	"github.com/rudder-operator/rudder/internal/watches"
)

// env is all an action reaches: the release it acts on, Helm through the Releases boundary,
// the watch's policies, and what the pass prepared for it. It holds neither the pass nor the
// World, so an action can neither decide (plan.Next does) nor change anything but through
// the boundary and its result, which do, report and the pass act on.
type env struct {
	helm    Releases
	scope   helm.Scope
	release string
	key     types.NamespacedName
	kind    string
	gen     int64
	want    records.Desired
	watch   *watches.Watch
	clock   clock.PassiveClock
	log     logr.Logger
	// mapper maps the kinds of a revision's objects; live reads them uncached, as rudder.
	mapper meta.RESTMapper
	live   client.Reader
	// carriedKeys are the labels a release carries from its CR (sharding), carried their
	// values on the CR now.
	carriedKeys []string
	carried     map[string]string
	// held is the failure that holds the desired (chart, values) back (nil: none), and
	// failures how often that pair failed before a new failure of it (0 after a reset).
	held     *failure
	failures int
	// request builds an install's or upgrade's request from the pass's chart and values (see
	// pass.request); objects are a revision's objects as the Memory of the watch keeps them.
	request func(context.Context, plan.Action) (*helm.Request, []note, *result)
	objects func(*release.Release) ([]*unstructured.Unstructured, error)
}

// env is the environment of the pass's actions.
func (p *pass) env() *env {
	if p.ev != nil {
		return p.ev
	}
	e := &env{mapper: p.w.Mapper, helm: p.w.Helm, scope: p.scope, release: p.relName, key: p.key, kind: p.w.gvk().Kind, gen: p.gen, want: p.want,
		watch: p.w.Watch, clock: p.w.Clock, log: p.log, live: p.w.Live, carriedKeys: p.w.Carried, carried: p.carried(),
		request: p.request, objects: func(rel *release.Release) ([]*unstructured.Unstructured, error) {
			return p.w.Memory.manifestObjects(p.key, rel, false, p.w.Mapper)
		}}
	if held, ok := p.heldBackFailure(); ok {
		e.held = held
		if !p.reset {
			e.failures = failures(held)
		}
	}
	p.ev = e
	return e
}

// madeRevision is the result of an install or upgrade that made revision rel.
func (e *env) madeRevision(req *helm.Request, rel *release.Release, reason, event, msg string) result {
	return result{verdict: succeeded, phase: phaseInSync, reason: reason,
		notes:    []note{{corev1.EventTypeNormal, reason, event, msg}},
		released: &condition{metav1.ConditionTrue, reason, msg},
		made:     rel, objects: req.Objects, head: records.HeadOf(rel), rel: rel,
		record: e.madeRecord(rel)}
}

// releaseFailed is the result of an install or upgrade that failed with err: retried when it
// is transient; otherwise failed, and held back unless the API server refused the release's
// identity. What follows (removing a failed install, a rollback) is plan.Next's to decide.
func (e *env) releaseFailed(event, verb, reason string, err error) result {
	if isTransient(err) {
		return result{verdict: retry, reason: reason, err: fmt.Errorf("%s %s: %w", verb, e.release, err)}
	}
	msg := fmt.Sprintf("%s release %s: %v", verb, e.release, err)
	if helm.ImmutableField(err) && !e.watch.Forces() {
		msg += "; the update changes an immutable field: upgrade.force on the watch replaces such objects (deletes and creates them)"
	}
	if helm.IsForbidden(err) {
		// Reported, with an Event, when the pass ends (see forbidden).
		return result{verdict: failed, forbidden: true, reason: rstatus.ReasonForbidden, message: msg}
	}
	switch {
	case helm.IsPostRenderError(err):
		// The watch's patches, not the chart: nothing was applied.
		reason = rstatus.ReasonPostRenderFailed
	case isChartError(err):
		// Refused before anything was applied.
		reason = rstatus.ReasonChartInvalid
	}
	// Released says so when the pass ends, with what became of the failure.
	return result{verdict: failed, reason: reason, message: msg,
		notes: []note{{corev1.EventTypeWarning, reason, event, msg}}, record: e.failedRecord(reason, err)}
}

// forbidden is the result of an action the API server refused to the release's identity.
func (e *env) forbidden(event, msg string) result { return forbidden(e.scope, event, msg) }

// forbidden is the result of a step the API server refused to scope's identity: retried with
// back-off, with a hint at the rule to grant.
func forbidden(scope helm.Scope, event, msg string) result {
	hint := "grant the missing rule in rudder's ClusterRole (config/rbac/role.yaml)"
	if scope.ServiceAccount != "" {
		hint = fmt.Sprintf("the release acts as ServiceAccount %s/%s: grant the missing rule to it (a Role in its namespace)",
			scope.Namespace, scope.ServiceAccount)
	}
	msg += "; " + hint + "; the release is retried with back-off"
	return result{verdict: retry, forbidden: true, reason: rstatus.ReasonForbidden, err: errors.New(msg),
		notes:    []note{{corev1.EventTypeWarning, rstatus.ReasonForbidden, event, msg}},
		released: &condition{metav1.ConditionFalse, rstatus.ReasonForbidden, msg}}
}

// retriesLeft reports whether the failure f (nil: none) is tried again.
func (e *env) retriesLeft(f *failure) bool { return retriesLeft(f, e.watch.Retries()) }
