// Package machine is the release state machine of one watch: one pass over one CR keeps its
// one Helm release.
//
// The controller (package controllers) takes each CR from its work queue and hands it to Run,
// or to Uninstall once it is being deleted. A pass reaches the world only through World
// (world.go): the watch and what serves it; the Releases boundary (releases.go) to Helm and
// its storage; readers of the caches and the API server; the Memory the passes of a watch
// keep between them (memory.go: drift marks, the manifests' object identities, the phase
// gauge); and doors the controller implements, each a small interface: the namespace's
// action slots (Turns), the dependent watches (Watches), the CR's status (StatusWriter) and
// the Rollouts. Each pass is in three steps, each a type of its own (pass.go) over the
// subject (the CR, fixed for the pass) and the observation (what the first step found):
//
//   - the observer (observe.go, rollout.go) reads what the pass decides from: the chart, the
//     values, the Go hooks' word, where a rollout leaves the CR, and the release's newest
//     revision, classified by records.DetermineState; the release's facts are read from its
//     records (facts.go);
//   - the actor (actions.go) takes one action at a time. plan.Next (internal/plan), a pure
//     function in a package of its own, maps the state and what the pass met so far (the
//     situation, situation.go) to the next action or to how the pass ends (ending.go); the
//     actor runs the action (do), observes the release as it left it, and asks again. Every
//     action goes this way: the uninstall of a deleted CR (Uninstall, a situation of its own)
//     and the reapply of drift (asked once the settler has looked at the objects) too. Each
//     action is taken at most once per pass, and acts only with its environment (env.go). On
//     a revision, the settler (objects.go) then looks at its objects: the reapply action
//     restores drift, kstatus says whether they are ready, and the post-release hooks run;
//   - the reporter (report.go) turns the outcome (outcome.go) into conditions, Events,
//     status.release (record.go, its one writer), the rudder_release_state gauge and the
//     controller-runtime Result.
//
// The files build on each other one way: the types an action's result speaks in
// (result.go), the action and its environment (env.go), the outcome, the actions (a file
// each, or a family: install.go, upgrade.go, rollback.go, repair.go, test.go, reapply.go,
// uninstall.go), the step types (pass.go), the steps, and the pass (run.go) on top; a file
// names nothing of a file above it.
//
// Helm and its storage are reached only through the Releases interface, which *helm.Client
// implements; unit tests drive the pass with *helmtest.Memory, Helm's own actions over its memory
// storage driver (fakehelm_test.go adds a spy and failures). What the pass reads of a revision
// is rudder's own view of it (internal/release), never a Helm type: the package imports no
// Helm package, and a chart reaches an action as the value the chart source or a revision
// (helm.ChartOf) gives, without the pass looking inside.
//
// # Adding an action
//
// An action does one thing to a release and returns a result; it decides nothing else and
// sets no condition itself. The test action (test.go: `helm test` after a release) is one
// added this way, in three files and the boundary:
//
//  1. The type, in a file of its own: name returns its plan.Action (its metric label, its
//     Events' action, its key in plan.Situation.Taken), and run makes the call to Helm with
//     what its *env (env.go) holds, and returns a result. The env is all it reaches: the
//     release, the Releases boundary, the watch's policies and Memory, and what the actor
//     prepared (an install's or upgrade's request, in the action itself: prepared); not the
//     pass, not the reconciler. The result is the verdict (succeeded, failed, retry, blocked),
//     the reason and message, the Events (notes), the conditions it sets (result.conditions,
//     by type: report sets them), what status.release learns (record), and how its own work
//     went (result.call: do, the one place every action runs through, counts it in
//     rudder_release_actions_total and times it, and acts on result.recheck and restored).
//     When it knows the release as it left it, result.after says so, which spares a read of
//     storage. Whatever it asks of Helm takes the pass's context, which a deletion of the CR
//     or rudder's stop cancels.
//  2. internal/plan: its plan.Action, the fact of plan.Situation that calls for it, and its
//     case in Next (which state, after which step); situation.go fills the fact in, and
//     actor.runner (actions.go) maps the choice to the type, with what the pass met that it
//     needs. Next stays pure, and the compiler holds it so: internal/plan imports nothing of
//     the pass.
//  3. record.go, when status.release records its outcome: a field of record, which
//     writeRelease writes. A fact a later decision reads belongs in the release's record
//     first (a label the Releases boundary writes with the revision, as rudder.dev/action and
//     rudder.dev/tested-revision are; records.Head reads it, and reads what this process wrote
//     before the cache of records shows it: records.Written), so that a pass reading the CR
//     from a cache behind that write decides the same. The release's facts (records.Facts: a
//     held-back failure, the once-per-value annotations' values handled, what rudder's newest
//     own revision was made from) are such labels: facts.go reads them, and markRecord writes
//     them on the newest record from the same records, before the status; a release with no
//     record keeps them in Memory (markRecord). What the report compares with (the Drifted
//     condition, what status.release says already) is read from the status this process wrote
//     before the cache of CRs shows it (the controller's statuses.go hands it to Run in place
//     of the cache's).
//     TestPassBehindTheCacheDecidesTheSame and TestPassWithItsStatusLostDecidesTheSame (in
//     package controllers) get a row.
//  4. The Releases boundary (releases.go), when it needs a new call of Helm: the method, on
//     *helm.Client and on *helmtest.Memory (internal/helm/helmtest).
//
// Then rows in TestNext (internal/plan) for every state and previous result it meets, rows in
// TestPassDecisionTable (controllers/pass_test.go, which drives passes through the
// Reconciler) for its Helm calls, conditions and Events, failures included, and a test
// against the control plane.
//
// # Adding a policy
//
// A watch's day-2 policies (internal/watches/policy.go) took the same layering, each where its
// decision is made:
//   - remediation.retries is two facts of the situation (retry.go, situation.go): a failure
//     with retries left ends the pass waiting (plan.EndRetrying) instead of held back, and a
//     retry that is due lets the pair go; the count is one of the release's facts
//     (failedRecord, facts.go).
//   - driftDetection is a variant of the reapply action (reapply.go): what it restores, and
//     whether it only reports (the Drifted condition).
//   - upgrade.force and crds are variants of the install and upgrade calls behind the Releases
//     boundary (helm.Request.Force and CRDs): they happen inside the one Helm action, so that
//     the release gains one revision, and the actions turn what they did into Events.
//   - rollout is a fact of observe and of the situation (rollout.go): whether a rollout moves
//     the CR to the watch's chart yet, else the chart its own release keeps (rolloutPin), and
//     the rolloutRollback action when one halted with onHalt rollback. The waves themselves are
//     decided by a coordinator per watch (rolloutcoord.go, rolloutwaves.go), whose state is a
//     Rollout object's status: passes never write it, and the coordinator never acts on a
//     release.
//
// # What the pass reads besides the caches
//
// Four views sit under the decisions; each answers a question the others cannot, and a reader
// of a pass should know which one a read sees:
//   - records.Written (internal/records/written.go): the release records this process wrote,
//     as the API server answered, until the cache of records shows them. The pass reads the
//     newest revision from that cache (Releases.Head), which lags the writes of the pass
//     before it; Written is client-go's mutation-cache idea over the metadata cache of
//     records, so that the decision is storage's, not an older view's.
//   - statuses (controllers/statuses.go): the same idea over the cache of CRs, for the status
//     and finalizers a pass wrote: the CR's own fields a pass reads (the status it reports
//     from, the finalizer it must not add twice) and no record holds. Both keep one entry per
//     object with a TTL and compare resourceVersions as integers; they stay two because one
//     holds label sets of Secrets seen as metadata and the other a CR's status as JSON, per
//     incarnation (UID) of the CR. Neither is client-go's NewIntegerResourceVersionMutationCache
//     itself: that one wraps an informer's cache.Store of whole objects and keeps a copy of
//     each object written, where the caches here are controller-runtime's (the records' a
//     metadata-only one) and what must be kept is a label set or a status as JSON, a tenth of
//     the decoded CR; both follow its rules (integer resourceVersions, the newer view wins,
//     a TTL).
//   - records.Memo (internal/records/memo.go): not a view of earlier writes but the reads of
//     one pass, so that Helm's repeated queries of the same records within an action cost one
//     request each; it ends with the pass.
//   - Memory (memory.go): what passes derive and keep between them (which CRs need a drift
//     check, the identities of each release's objects, the phase each pass ended in, the
//     facts of a release with no record); it holds nothing storage or the API server must
//     confirm, and a new process computes it again.
//
// No decision reads the CR's status. Every fact is a record's label, or, for a release with
// no record (an install refused before Helm stored anything: the confinement rule stores no
// revision), kept in Memory, which a new process computes again by rendering (the refusal
// repeats). The look at the cache of records (observe.go) reads no status: the cache shows
// what this process wrote (records.Written), and a release is taken to be absent without a
// read of storage only when the pass took the CR on (Read.TakenOn: no pass acted on it
// before), whatever its status says. What a pass reads of its status serves the report: what
// to write, what is written already, and a failure's message, which no label holds.
//
// It owns what a CR's status says and the releases' lifecycle; the work queue, the watches
// and the status writes are the controller's (package controllers), how a release is
// rendered, confined and stored belongs to internal/helm, what a watch makes of a CR to
// internal/watches.
package machine
