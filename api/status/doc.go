// Package status holds the status every rudder-managed CR carries, whatever its kind:
// kstatus-compatible conditions, observedGeneration and what the Helm release is made of.
// Built-in kinds embed Common in their status; CRDs for chart-only kinds declare the same fields
// (see config/samples/generic).
//
// +kubebuilder:object:generate=true
package status
