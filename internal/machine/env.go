package machine

import (
	"context"
	"errors"
	"fmt"
	"net"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	rstatus "github.com/rudder-operator/rudder/api/status"
	"github.com/rudder-operator/rudder/internal/guard"
	"github.com/rudder-operator/rudder/internal/helm"
	"github.com/rudder-operator/rudder/internal/plan"
	"github.com/rudder-operator/rudder/internal/records"
	"github.com/rudder-operator/rudder/internal/release"
	"github.com/rudder-operator/rudder/internal/watches"
)

// An action is one thing a pass does to a release, or to the objects of its revision
// (reapply). It does that one thing and says how it went, as data: what follows is plan.Next's
// to decide, and what the CR is told is report's (report.go).
type action interface {
	// name names the action: its Events, its metric label, its key in plan.Situation.Taken.
	name() plan.Action
	run(ctx context.Context, e *env, obs observed) result
}

// env is all an action reaches: the release it acts on, Helm through the Releases boundary
// but its reader (acting), the watch's policies, and what the pass prepared for it. It holds
// neither the pass nor the World, so an action can neither decide (plan.Next does), nor read
// the release's storage (the observer does), nor change anything but through the boundary and
// its result, which do, report and the pass act on.
type env struct {
	helm    acting
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
	// memory keeps the objects of the release's revisions (Memory.manifestObjects).
	memory *Memory
}

// prepared is what the actor prepares for an install or upgrade (actor.prepare): Helm's
// request from the pass's chart and values, with the Events to send before it, or the result
// to end on instead when there is no request to make.
type prepared struct {
	req  *helm.Request
	pre  []note
	stop *result
}

// madeRevision is the result of an install or upgrade that made revision rel.
func (e *env) madeRevision(req *helm.Request, rel *release.Release, reason, event, msg string) result {
	return result{verdict: succeeded, phase: phaseInSync, reason: reason,
		notes:    []note{{corev1.EventTypeNormal, reason, event, msg}},
		released: &condition{metav1.ConditionTrue, reason, msg},
		made:     rel, objects: req.Objects, rendered: req.Rendered, head: records.HeadOf(rel), rel: rel,
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
	if helm.ImmutableField(err) && !e.watch.Policies().Forces() {
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

// madeRecord records a revision rudder made from the spec, and lets any held-back pair go.
func (e *env) madeRecord(rel *release.Release) record {
	return record{clearFailed: true, revision: &revisionRecord{
		number: rel.Version, chart: rel.Chart.Ref(), chartDigest: e.want.ChartDigest, valuesDigest: e.want.ValuesDigest,
		applied: &rstatus.AppliedRelease{Revision: rel.Version, Generation: e.gen, ChartDigest: e.want.ChartDigest},
	}}
}

// failedRecord holds the desired (chart, values) back after it failed for reason: one failure
// more than the held-back one's, unless this pass reset the history.
func (e *env) failedRecord(reason string, err error) record {
	at := metav1.NewTime(e.clock.Now())
	return record{failed: &failure{reason: reason, failed: rstatus.FailedRelease{
		ChartDigest: e.want.ChartDigest, ValuesDigest: e.want.ValuesDigest, Reason: reason, Message: truncate(err.Error(), 1000),
		Failures: e.failures + 1, LastFailure: &at}}}
}

// eventAction is the action Events name for a release action.
func eventAction(a action) string {
	if a.name() == plan.Install {
		return "Install"
	}
	return "Upgrade"
}

// isChartError: the chart rendered objects outside its scope, against its ownership rules,
// of unknown kinds or beyond its limits; nothing was applied.
func isChartError(err error) bool {
	var ce *guard.ConfinementError
	var ue *guard.UnknownKindError
	var le *helm.LimitError
	return errors.As(err, &ce) || errors.As(err, &ue) || errors.As(err, &le)
}

// isTransient: errors worth retrying as they are (the API server was briefly unreachable or
// overloaded), as opposed to what the chart and values caused.
func isTransient(err error) bool {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return true
	}
	var ne net.Error
	if errors.As(err, &ne) || helm.IsUnavailable(err) {
		return true
	}
	return apierrors.IsServerTimeout(err) || apierrors.IsTimeout(err) || apierrors.IsTooManyRequests(err) ||
		apierrors.IsServiceUnavailable(err) || apierrors.IsInternalError(err) || apierrors.IsConflict(err)
}
