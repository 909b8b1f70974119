// Package cli holds rudder's subcommands besides the manager: scaffold (a CRD, RBAC, a watch and
// a sample from a chart), template (what rudder would apply for a CR, without a cluster), diff
// (what a chart edit would change for each CR, before it is live) and lint (watches.yaml,
// charts and CRs, for CI). They build releases with the reconciler's own
// functions (watches.Watch.Values and Request, helm.ValidateValues, helm.Render), so that they can
// never disagree with it. It touches no cluster.
package cli
