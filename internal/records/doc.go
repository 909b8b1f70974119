// Package records is rudder's release storage and what it reads of it: Helm's records,
// written as Helm writes them (a Secret per revision, the Secret driver's names, type, labels
// and payload: plain `helm` of either major version reads and rolls them back), with rudder's
// own labels on each (labels.go: the owner, the digests, which revision rudder made from a
// spec and with which action, or as a rollback, and a run of its tests), and the release's
// facts on its newest record (facts.go: the failure held back, the annotation values handled,
// what rudder's newest own revision was made from: what a pass decides from, which a CR's
// status only reports); the history reads
// (history.go); a revision's Head as the labels say it, and DetermineState, the pure function
// that says what a release needs (state.go); and the cached reads of the records' metadata
// that spare an install's name check, an upgrade's history reads and a pass's read of the
// newest revision a LIST of the namespace (cache.go, query.go); a pass reads each record from
// the API server once (memo.go), and what rudder wrote before the cache shows it (written.go).
//
// It acts as nobody and checks nothing: internal/helm's actions store through a Driver of the
// identity and confinement they act in.
package records
