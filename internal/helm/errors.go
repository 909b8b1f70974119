package helm

import (
	"errors"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/rudder-operator/rudder/internal/guard"
	"github.com/rudder-operator/rudder/internal/libtext"
	"github.com/rudder-operator/rudder/internal/render"
)

// The errors of an action that Helm's own errors no longer say by type: its kube client and
// template engine keep only their text, so the action's guard (guard.Guard) says them (see
// run.result).

// UnavailableError: an action failed because a request of it could not be served for now (the
// API server unreachable or overloaded, or etcd behind it down), which Helm's error no longer
// says by type (its kube client joins the errors of an update as text). Retry it as it is: it
// says nothing about the chart or the values.
type UnavailableError struct{ Err error }

func (e *UnavailableError) Error() string { return e.Err.Error() }
func (e *UnavailableError) Unwrap() error { return e.Err }

// IsUnavailable reports whether err is an action's failure to reach the API server.
func IsUnavailable(err error) bool {
	var ue *UnavailableError
	return errors.As(err, &ue)
}

// IsPostRenderError reports whether err is the failure of a watch's post-renderers or common
// metadata on what the chart rendered (render.PostRenderError).
func IsPostRenderError(err error) bool {
	var pe *render.PostRenderError
	return errors.As(err, &pe)
}

// ForbiddenError: the API server refused requests of an action to the identity it was made as
// (rudder's ClusterRole, or the RBAC of the scope's ServiceAccount lacks a rule).
type ForbiddenError struct {
	// User the requests were made as; "" for rudder's own identity.
	User string
	// Refused holds the API server's messages, which name the verb, resource and namespace.
	Refused []string
	Err     error
}

func (e *ForbiddenError) Error() string { return strings.Join(e.Refused, "; ") }
func (e *ForbiddenError) Unwrap() error { return e.Err }

// IsForbidden reports whether err is a refusal by the API server's authorization (and not by
// rudder's confinement, nor by admission: a ResourceQuota or a webhook that denies is a
// failure of the release like any other).
func IsForbidden(err error) bool {
	var ce *guard.ConfinementError
	if errors.As(err, &ce) {
		return false
	}
	var fe *ForbiddenError
	// Both the authorizer and admission answer 403 Forbidden; only the message tells them apart.
	return errors.As(err, &fe) || (apierrors.IsForbidden(err) && libtext.Unauthorized(err.Error()))
}
