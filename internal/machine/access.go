package machine

import (
	"fmt"
	"strings"
)

// AccessError says what rudder lacks to watch a kind a chart renders.
type AccessError struct {
	Denied []string // "list/watch configmaps cluster-wide", ...
}

func (e *AccessError) Error() string {
	return fmt.Sprintf("rudder may not %s: grant it in its ClusterRole (config/rbac/role.yaml) so that it can watch and restore what the "+
		"chart renders",
		strings.Join(e.Denied, "; "))
}
