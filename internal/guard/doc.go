// Package guard is what a release may do, decided apart from how Helm does it: the
// Confinement a release is held to (the namespaces and cluster-scoped kinds its watch allows,
// confine.go), the rules on an object's content (rules.go), ownership — a release changes and
// deletes only what it made (ownership.go) — the identity rules (what ServiceAccounts and
// binding subjects its objects may name, identity.go), and the read rule of a template's
// lookups (lookups.go).
//
// They are applied twice. Before an action's first write, to what it would apply: a render's
// output (Confinement.CheckRendered), a release's manifest, hooks and CRDs (CheckRelease,
// CheckCRDs, CheckIdentities, CheckManifestObject). And on every request an action makes, by
// the Guard in front of its HTTP transport (guard.go), whatever path of Helm's makes it: the
// render's lookups, reads and writes of objects, hooks, CRDs, deletions. A request outside the
// rules is refused before it leaves the process, with a 403 that names the rule.
//
// It knows nothing of Helm's actions or storage: internal/helm builds a Guard for each action
// and reads from it why the action failed.
package guard
