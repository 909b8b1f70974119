// Package guard is what a release may do, decided apart from how Helm does it: the
// Confinement a release is held to (the namespaces and cluster-scoped kinds its watch allows,
// confine.go), the rules on an object's content (rules.go), ownership — a release changes and
// deletes only what it made (ownership.go) — the read rule of a template's lookups
// (lookups.go), and the rules that read a release's objects together (objectrules.go): what
// identities it hands out (identity.go), what it grants (grants.go), what pod privileges it
// asks (podsecurity.go, Kubernetes' Pod Security Standards), what it names of other objects
// (references.go) and externalIPs.
//
// They are applied twice. Before an action's first write, to what it would apply: a render's
// output (Confinement.CheckRendered), a release's manifest, hooks and CRDs (CheckRelease,
// CheckCRDs, CheckObjectRules, CheckManifestObject). And on every request an action makes, by
// the Guard in front of its HTTP transport (guard.go), whatever path of Helm's makes it: the
// render's lookups, reads and writes of objects, hooks, CRDs, deletions. A request outside the
// rules is refused before it leaves the process, with a 403 that names the rule.
//
// It knows nothing of Helm's actions or storage: internal/helm builds a Guard for each action
// and reads from it why the action failed, and resolves the references a release does not
// resolve itself (ReferenceReader).
package guard
