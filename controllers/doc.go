// Package controllers is rudder's controller of one watch: it takes the watch's CRs from
// controller-runtime's work queue and passes each to the release state machine
// (internal/machine), which keeps one Helm release per CR.
//
// A Reconciler (reconciler.go; its Reconcile in reconcile.go) is thin: it reads the CR from
// the cache, admits the pass into its namespace's share of the workers (internal/gate), adds
// rudder's finalizer, and hands the CR to machine.Run, or to machine.Uninstall once the CR is
// being deleted (finalize.go). What the state machine reaches of it is machine.World, which
// New builds once per watch (world.go): the watch and what serves it, and the doors
// (world.go, rollout.go) through which a pass asks
// for a dependent watch, writes the CR's status, and reads a Rollout. Around the passes it
// keeps:
//
//   - the status and finalizers this process wrote, for a pass that reads a cache behind that
//     write (statuses.go), and the CRs whose cache is behind the API server (conflicted);
//   - the watches (setup.go): the CRs, filtered to the updates a pass acts on; the release
//     records; the operands, whose events mark drift in the machine's Memory; the chart and
//     values sources, whose changes queue the CRs that use them;
//   - the rollout coordinator of a watch with a rollout policy (rolloutcoord.go,
//     rolloutwaves.go), which moves each Rollout from wave to wave and never acts on a
//     release.
//
// The manager's wiring is not this package's: internal/wiring's NewManager builds the manager
// and its caches (late CRDs included), the chart source, the Helm client, the values sources
// and the Go hooks of the built-in kinds, and one Reconciler per watch through New and
// Options.
//
// What each change takes:
//
//   - an action: internal/machine's doc.go says how;
//   - a watch field or a limit: internal/watches' doc.go says how (its one declaration in
//     internal/watches/fields.go, which the reference's tables and `rudder lint` come from);
//   - a door: a method on a small interface of machine.World, implemented here.
//
// The files build on each other one way: statuses.go and metrics.go at the bottom;
// reconciler.go (the Reconciler and coordinator types, and what every file reads of them) on
// them; then the finalizer and the rollouts door, Reconcile and the coordinator's waves, its
// Reconcile (rolloutcoord.go), the watches (setup.go), and New with the doors (world.go) on
// top.
package controllers
