// Package helm is rudder's Helm layer: one action configuration per namespace on the standard
// Secret storage driver (so plain `helm` sees every release), the release labels that tie a
// release to its CR, a post-renderer that confines rendered objects and marks them as owned, and
// DetermineState, the pure function that says what a release needs.
//
// It knows nothing of controller-runtime's manager or of CR status: the reconciler in
// controllers/ maps its results and errors to conditions.
package helm
