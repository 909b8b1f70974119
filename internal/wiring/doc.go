// Package wiring is rudder's manager and what it wires together: the controller-runtime
// manager and its caches (the CRs of each watch, a kind whose CRD comes later included, the
// release records, the operands), the chart source, the Helm client and its render pool, the
// values sources of valuesFrom, the Event recorder, the Go hooks of the built-in kinds, and
// one controllers.Reconciler per watch. main.go parses flags into ManagerOptions; tests and
// benchmarks call NewManager directly.
//
// It reaches the reconcilers only through controllers.New and controllers.Options; the
// release state machine does not know this package.
package wiring
