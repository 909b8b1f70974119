// Package machine is the release state machine of one watch: one pass over one CR keeps its
// one Helm release.
//
// The controller (package controllers) hands each CR from its work queue to Run, or to
// Uninstall once it is being deleted. A pass reaches the world only through World (world.go):
// the watch and what serves it; the Releases boundary (releases.go) to Helm and its storage,
// which *helm.Client's views implement and *helmtest.Memory's fake; readers of the caches and the API
// server; the Memory the passes of a watch keep between them (memory.go); and small
// interfaces the controller implements: the namespace's action slots (Turns), the dependent
// watches (Watches), the CR's status (StatusWriter) and the Rollouts.
//
// A pass is a pipeline of values, in one direction (pass.go):
//   - observe (observe.go, rollout.go, facts.go) reads the chart, the values, the Go hooks'
//     word, where a rollout leaves the CR, and the release's newest revision, classified by
//     records.DetermineState, with the facts its records carry; it returns an observation no
//     later step changes;
//   - the actor's walk (actions.go) builds each situation (situation.go) from the observation
//     and the release as the last action left it, which the observer reads again; plan.Next
//     (internal/plan, pure) yields the action, or how the pass ends (ending.go); an action
//     (install.go, upgrade.go, rollback.go, repair.go, test.go, reapply.go, uninstall.go)
//     does one thing with its environment (env.go) and returns a result, folded into the
//     outcome (outcome.go); each runs at most once per walk. A deletion (Uninstall) and the
//     restoring of drift are walks of the same loop;
//   - the settler (objects.go) looks at the objects of the revision the pass ended on: drift,
//     kstatus's readiness, the post-release hooks;
//   - the reporter (report.go) turns the outcome into conditions, Events, status.release
//     (record.go), the rudder_release_state gauge and the controller-runtime Result.
//
// Contracts: no decision reads the CR's status (every fact is a release record's label, or
// Memory's for a release with no record); a pass that reads caches behind its own writes
// decides as one that reads storage (records.Written, controllers/statuses.go); the package
// imports no Helm package, and reads a revision as rudder's own view of it (internal/release).
// How to add an action or a policy, and the views a pass reads: docs/development.md, "The
// pass".
package machine
