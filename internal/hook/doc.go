// Package hook is how Go code layers behaviour on top of a kind's Helm release.
//
// A PreRelease hook runs before rudder decides what the release needs: it sees the CR and the
// values and may hold the release back ("not yet, look again in d") or change the values. A
// PostRelease hook runs after the release is in the state rudder wanted: it reads the operands
// and writes kind-specific status into the CR. Hooks change the CR only in memory; the reconciler
// persists status once per pass, with one patch.
//
// status.conditions is shared: rudder owns the types it sets (status.RudderOwns: Ready,
// Reconciling, Stalled, Released, ChartReady, Paused, RollbackRequest) and writes them on every
// pass; a hook owns every other type. What a hook sets, changes or removes of its own types is
// kept on every pass (status.SetConditions writes them); its edit of one of rudder's is not.
// Every other field of status besides observedGeneration, release and inventory is the hook's.
// status.inventory is read-only to a hook: the pass shares it with rudder's cache of CRs.
//
// An error from any hook fails the pass: the CR gets a condition and an Event naming the hook,
// and the request is retried with back-off. Hooks must be safe for concurrent use across CRs.
package hook
