// Package controllers is rudder's generic reconciler and its wiring.
//
// A Reconciler reconciles the CRs of one watches.yaml entry, keeping one Helm release per CR.
// Each reconcile is a pass in three steps (pass.go): observe what the pass decides from,
// act on it (one Helm action, or none), report the outcome as conditions, Events, metrics and
// the Result. Helm is reached through the Releases interface, which *helm.Client implements.
//
// NewManager wires rudder together: the manager and its caches, the chart source, the Helm
// client, one Reconciler per watch, and the Go hooks of the built-in kinds (controllers/at,
// controllers/application). main.go parses flags into ManagerOptions; tests and benchmarks call
// NewManager directly.
//
// It owns the CRs' status and the releases' lifecycle; how a release is rendered, confined and
// stored belongs to internal/helm, what a watch makes of a CR to internal/watches.
package controllers
