package helm

import (
	"errors"
	"fmt"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/rudder-operator/rudder/internal/guard"
)

// Only the authorizer's 403 is Forbidden; admission's (a quota, a webhook) is the release's
// own failure, and a confinement refusal is rudder's.
func TestIsForbidden(t *testing.T) {
	t.Parallel()
	gr := schema.GroupResource{Resource: "configmaps"}
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{apierrors.NewForbidden(gr, "x", errors.New(`User "system:serviceaccount:ns:deployer" cannot create resource "configmaps" in API group "" in the namespace "ns"`)), true},
		{apierrors.NewForbidden(schema.GroupResource{Resource: "serviceaccounts"}, "deployer", errors.New(`User "rudder" cannot impersonate resource "serviceaccounts" in API group "" in the namespace "ns"`)), true},
		{apierrors.NewForbidden(gr, "", errors.New(`User "u" cannot get path "/metrics"`)), true},
		{fmt.Errorf("installing: %w", &ForbiddenError{Refused: []string{"whatever the server said"}}), true},
		{apierrors.NewForbidden(gr, "x", errors.New("exceeded quota: q, requested: count/configmaps=1, used: count/configmaps=0, limited: count/configmaps=0")), false},
		{apierrors.NewForbidden(gr, "x", errors.New("status unknown for quota: q, resource: count/configmaps")), false},
		{apierrors.NewForbidden(gr, "x", errors.New(`admission webhook "deny.example.com" denied the request: no`)), false},
		{&guard.ConfinementError{Violations: []guard.Violation{{Kind: "ConfigMap"}}}, false},
		{errors.New("boom"), false},
	} {
		if got := IsForbidden(tc.err); got != tc.want {
			t.Errorf("IsForbidden(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}
