// Package helm is rudder's Helm layer: Helm actions on the standard Secret storage driver (so
// plain `helm` sees every release), each made for a Scope — the identity it acts as (rudder, or
// a tenant's ServiceAccount through impersonation) and the guard.Confinement it is held to, and
// a post-renderer that marks rendered objects as owned. The records those actions store, their
// labels and what a release needs (DetermineState) are internal/records'.
//
// What a release may do is internal/guard's; this package applies it wherever Helm would act:
// the post-rendered manifest (postrender.go), every hook and the chart's crds/ before an
// action's first write (checkedDriver, Install's precheck), uninstall and drift re-apply, the
// render's output before Helm's action sees it, and a guard.Guard in front of every request an
// action makes (client.go, run), which is also what confines a template's lookup. The
// ownership checks that read the cluster as the action's identity (the hooks before an
// action's first write, what holds a cluster-scoped object) are owned.go's.
//
// Each action stores its revisions through a checkedDriver (driver.go) over internal/records'
// Driver: checked against the scope, and marked as rudder's (StoreMarked gives the marks alone
// to internal/helm/helmtest's Memory, Helm's actions over its memory driver for unit tests).
//
// It knows nothing of controller-runtime's manager or of CR status: the reconciler in
// controllers/ maps its results and errors to conditions.
package helm
