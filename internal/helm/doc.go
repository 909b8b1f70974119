// Package helm is rudder's Helm layer: Helm actions on the standard Secret storage driver (so
// plain `helm` sees every release), each made for a Scope — the identity it acts as (rudder, or
// a tenant's ServiceAccount through impersonation) and the Confinement it is held to, and a
// post-renderer that marks rendered objects as owned. The records those actions store, their
// labels and what a release needs (DetermineState) are internal/records'.
//
// Confinement is one check (confine.go) applied wherever Helm would act: the post-rendered
// manifest, every hook and the chart's crds/ before an action's first write (checkedDriver,
// Install's precheck), uninstall and drift re-apply, and a guard on every request an action
// makes (guard.go), which is also what confines a template's lookup. Beyond where it acts, a
// release reads through lookups only what it made or its watch allows (lookups.go), and hands
// out no identity its watch did not name (identity.go); both are checked on the render's
// output before Helm's action sees it (checkRendered).
//
// Each action stores its revisions through a checkedDriver (driver.go) over internal/records'
// Driver: checked against the scope, and marked as rudder's (StoreMarked gives the marks alone
// to internal/helm/helmtest's Memory, Helm's actions over its memory driver for unit tests).
//
// It knows nothing of controller-runtime's manager or of CR status: the reconciler in
// controllers/ maps its results and errors to conditions.
package helm
