// Package at holds the Go hooks of the At kind (cnat.ishankhare.dev/v1alpha1): the phase machine
// PENDING → RUNNING → DONE that decides when the release (one Pod running the command) is
// installed, and records the outcome. It owns the phase fields of the At's status and nothing
// else; the release itself is the generic reconciler's.
package at
