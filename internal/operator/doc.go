// Package operator wires rudder together: the manager and its caches, the chart source, the
// Helm client, one generic reconciler per watches.yaml entry, and the Go hooks of the built-in
// kinds. main.go parses flags into Options; tests and benchmarks call New directly.
package operator
