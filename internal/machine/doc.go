// Package machine is the release state machine of one watch: one pass over one CR keeps its
// one Helm release.
//
// The controller (package controllers) hands each CR from its work queue to Run, or to
// Uninstall once it is being deleted. A pass reaches the world only through World (world.go):
// the watch and what serves it; the Releases boundary (releases.go) to Helm and its storage,
// which *helm.Client implements and *helmtest.Memory fakes; readers of the caches and the API
// server; the Memory the passes of a watch keep between them (memory.go); and small
// interfaces the controller implements: the namespace's action slots (Turns), the dependent
// watches (Watches), the CR's status (StatusWriter) and the Rollouts.
//
// A pass observes, decides, acts and reports:
//   - observe (observe.go, rollout.go, facts.go) reads the chart, the values, the Go hooks'
//     word, where a rollout leaves the CR, and the release's newest revision, classified by
//     records.DetermineState, with the facts its records carry;
//   - plan.Next (internal/plan, pure) maps that situation (situation.go) to the next action
//     or to how the pass ends (ending.go);
//   - an action (install.go, upgrade.go, rollback.go, repair.go, test.go, reapply.go,
//     uninstall.go) does one thing to the release with its environment (env.go) and returns a
//     result; each runs at most once per pass, and the pass asks plan.Next again;
//   - on the revision the pass ends on, the objects are looked at (objects.go): drift
//     restored, kstatus's readiness, the post-release hooks;
//   - report.go turns the outcome (outcome.go) into conditions, Events, status.release
//     (record.go), the rudder_release_state gauge and the controller-runtime Result.
//
// Contracts: no decision reads the CR's status (every fact is a release record's label, or
// Memory's for a release with no record); a pass that reads caches behind its own writes
// decides as one that reads storage (records.Written, controllers/statuses.go); the package
// imports no Helm package, and reads a revision as rudder's own view of it (internal/release).
// How to add an action or a policy, and the views a pass reads: docs/development.md, "The
// pass".
package machine
