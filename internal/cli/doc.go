// Package cli is rudder's command line, on cobra (NewCommand): the operator (`rudder`, `rudder
// run`: main's Manager), and the tools beside it: scaffold (a CRD, RBAC, a watch and a sample
// from a chart), template (what rudder would apply for a CR, without a cluster), diff (what a
// chart edit would change for each CR, before it is live), lint (watches.yaml, charts and CRs,
// for CI), version and completion. The tools build releases with the reconciler's own
// functions (watches.Watch.Values and Request, helm.ValidateValues, helm.Render), so that they
// can never disagree with it; only `diff --cluster` reads a cluster.
package cli
