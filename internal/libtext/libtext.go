// Package libtext is the one place where rudder decides on the words of another library: an
// error's or a record's text, where that library gives no type, status cause or sentinel to
// decide on. Everywhere else rudder decides on types (errors.Is and errors.As, apierrors'
// reasons and causes, Helm's driver errors).
//
// Each function names the library and the place whose words it reads, and libtext_test.go makes
// that library say them at the version go.mod (or, for the API server, hack/tools) pins: Helm's
// actions over its memory driver, k8s.io/apiserver's refusal, the Go runtime's fatal errors, and
// the API server's validation on the real control plane. A bump that rewords one fails a test
// instead of silently changing what rudder retries, holds back, replaces or reports.
//
// It imports nothing but the standard library.
package libtext

import (
	"fmt"
	"regexp"
	"strings"
)

// helmNameInUse is Helm's install refusing a name its own look at storage finds taken
// (helm.sh/helm/v4 pkg/action/install.go, availableName; Helm 3 spelled it "re-use"); it has no typed error for it.
const helmNameInUse = "cannot reuse a name that is still in use"

// HelmNameInUse reports whether err is Helm's install refusing a release name that is taken.
func HelmNameInUse(err error) bool {
	return err != nil && strings.Contains(err.Error(), helmNameInUse)
}

// helmCannotImport is Helm's install or upgrade finding an object it would create that exists
// and is not the release's (pkg/action/validate.go, existingResourceConflict).
const helmCannotImport = "exists and cannot be imported into the current release"

// HelmCannotImport reports whether err is Helm refusing to take over an object that exists.
func HelmCannotImport(err error) bool {
	return err != nil && strings.Contains(err.Error(), helmCannotImport)
}

// helmRollback is the description Helm's rollback gives the revision it makes
// (pkg/action/rollback.go, prepareRollback).
const helmRollback = "Rollback to %d"

// helmUpgraded is the description Helm's upgrade gives the revision it deploys
// (pkg/action/upgrade.go, releasingUpgrade), Helm 3's and Helm 4's alike.
const helmUpgraded = "Upgrade complete"

// HelmUpgraded reports whether a revision's description is that of a deployed Helm upgrade
// (a person's helm upgrade: rudder describes its own).
func HelmUpgraded(description string) bool { return description == helmUpgraded }

// HelmRollbackTarget is the revision a rollback's description says it returned to (0, false:
// the description is not a rollback's). Helm's CLI records it nowhere else.
func HelmRollbackTarget(description string) (int, bool) {
	var to int
	if n, err := fmt.Sscanf(description, helmRollback, &to); err != nil || n != 1 || to <= 0 {
		return 0, false
	}
	return to, true
}

// unauthorized is the API server's refusal of a request by its authorizer (RBAC), to a
// resource or a path, impersonation included (k8s.io/apiserver
// pkg/endpoints/handlers/responsewriters, forbiddenMessage). Both the authorizer and admission
// (a ResourceQuota, a webhook, a policy) answer 403 Forbidden with the same reason and
// details; only the message tells them apart.
var unauthorized = regexp.MustCompile(`User ".*" cannot \S+ (resource|path) `)

// Unauthorized reports whether a 403's message is the authorizer's.
func Unauthorized(msg string) bool { return unauthorized.MatchString(msg) }

// The API server's words for an update it refuses whatever the new value (k8s.io/kubernetes
// pkg/apis/*/validation): apimachinery's FieldImmutableErrorMsg (a Deployment's selector, a
// Job's template, an immutable ConfigMap's data), "spec is immutable after creation" (a
// PersistentVolumeClaim's), "Forbidden: updates to statefulset spec for fields other than ..."
// (a StatefulSet's volumeClaimTemplates), and "may not change once set" (a Service's
// clusterIP).
const (
	immutable       = "immutable"
	forbiddenUpdate = "Forbidden: updates to"
	onceSet         = "may not change once set"
)

// ImmutableUpdate reports whether msg (an API server's answer, or an action's error whose text
// Helm joined from several) says that an update was refused because it changes a field that
// cannot change.
func ImmutableUpdate(msg string) bool {
	return strings.Contains(msg, immutable) || strings.Contains(msg, forbiddenUpdate) || strings.Contains(msg, onceSet)
}

// The Go runtime's fatal errors for a goroutine past its stack limit (runtime/stack.go,
// newstack) and for memory it could not get: "runtime: out of memory" when the OS refuses a
// mapping (runtime/malloc.go, mem_linux.go), "runtime: cannot allocate memory" when the heap's
// own metadata cannot grow (runtime/malloc.go persistentalloc, mheap.go), which is what a
// worker under its memory rlimit meets when the machine is loaded. A render worker that dies of
// either says so on its stderr, and nowhere else.
const (
	runtimeStackExceeded = "goroutine stack exceeds"
	runtimeOutOfMemory   = "out of memory"
	runtimeCannotAlloc   = "runtime: cannot allocate memory"
)

// StackExceeded reports whether a Go process's stderr says it died past its stack limit.
func StackExceeded(stderr string) bool { return strings.Contains(stderr, runtimeStackExceeded) }

// OutOfMemory reports whether a Go process's stderr says it died for want of memory.
func OutOfMemory(stderr string) bool {
	return strings.Contains(stderr, runtimeOutOfMemory) || strings.Contains(stderr, runtimeCannotAlloc)
}
