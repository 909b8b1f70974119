// Package records is rudder's release storage and what it reads of it: Helm's records,
// written as Helm writes them (a Secret per revision, the Secret driver's names, type, labels
// and payload: plain `helm` of either major version reads and rolls them back), with rudder's
// own labels on each (labels.go: the owner, the digests, which revision rudder made from a
// spec or as a rollback); the history reads (history.go); a revision's Head as the labels say
// it, and DetermineState, the pure function that says what a release needs (state.go); and
// the cached reads of the records' metadata that spare an install's name check and an
// upgrade's history read a LIST of the namespace (cache.go, query.go).
//
// It acts as nobody and checks nothing: internal/helm's actions store through a Driver of the
// identity and confinement they act in.
package records
