// Package watches loads watches.yaml: the list of GroupVersionKinds rudder reconciles, each with
// the chart that renders its operands and the options of its controller.
//
// It validates everything it can without a cluster (fields, templates, selectors, durations,
// chart directories) and names the entry and field in every error. It owns no runtime state.
//
// Every key of an entry and of its limits is declared once, in fields.go: its JSON key, its
// default as the reference shows it, its docs line, and for a limit its check. The tables of
// docs/reference.md are generated from there (`make manifests`), and tests fail when the
// structs, the tables or the reference disagree.
//
// The files build on each other one way: the schema (types.go: Watch and every section of
// it), what a watch answers from each section (watches.go, policy.go, rollout.go, …), and
// load.go on top, which completes and checks each entry section by section.
//
// # Adding a field
//
//  1. types.go: the field on Watch, with its JSON key; watches.go (or its section's file): the
//     accessor the reconciler reads, with the default applied — a day-2 policy's on Policies
//     (RollsBack, HistoryLimit, Retries, …), what the watch is and renders from on Watch; a
//     default that is a number is a constant beside DefaultMaxHistory.
//  2. fields.go: its row in Fields, where the reference should list it.
//  3. Its check, in the step of complete (load.go) that owns its concern (checkLimits,
//     checkTenancy, checkPolicies, …), naming the field in the error; `rudder lint` reports
//     it as Load does.
//  4. `make manifests` rewrites the reference's table; watches_test.go gets a row for a value that
//     loads and one that does not.
//
// # Adding a limit
//
//  1. types.go: the field on Limits (a quantity or a duration as metav1 types, so that
//     watches.yaml spells them as Kubernetes does); limits.go: its mapping in Limits.helm.
//  2. internal/helm/limits.go: the field on helm.Limits with its Default constant, and where it
//     is enforced (a limit of what a render may do goes on to render.Limits, which
//     internal/helm/render.go fills); a refusal is a LimitError naming the limit.
//  3. fields.go: its row in LimitFields: key, the default made of helm's constant, docs line,
//     check.
//  4. `make manifests`, and a test that a CR past the limit is refused naming it.
package watches
