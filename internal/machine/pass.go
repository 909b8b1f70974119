package machine

import (
	"context"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	rstatus "github.com/rudder-operator/rudder/api/status"
	"github.com/rudder-operator/rudder/internal/chartsource"
	"github.com/rudder-operator/rudder/internal/helm"
	"github.com/rudder-operator/rudder/internal/hook"
	"github.com/rudder-operator/rudder/internal/records"
)

// A pass is one reconcile of one CR, in three steps, each a type of its own (below) over the
// observation they share:
//
//   - the observer (observe.go, rollout.go) reads what the pass decides from: the chart, the
//     values, the Go hooks' word, where a rollout leaves the CR, and the release's newest
//     revision, read once and classified once by records.DetermineState;
//   - the actor (actions.go) takes the actions that state calls for, one at a time, each
//     chosen by plan.Next from the state and what the previous action left, until it says how
//     the pass ends (ending.go); then, on a revision, the settler looks at its objects
//     (objects.go), restoring drift (the reapply action) and computing their readiness;
//   - the reporter (report.go) turns the steps' results into conditions, observedGeneration,
//     status.release (record.go), the rudder_release_state gauge, Events and the
//     controller-runtime Result. It is the only step that sets a condition or writes
//     status.release.
//
// Between the actor and the reporter the pass writes the release's facts on its newest
// record (markRecord, run.go), and after them the status (persist).
type pass struct {
	*observation
	// origStatus is the CR's status as read, to patch only what the pass changed.
	origStatus any
	// st is the status the pass writes: the reporter alone sets it, from the steps' results.
	st rstatus.Common
}

// Read is what the controller found of a CR, besides the copy a pass works on.
type Read struct {
	// Status is the CR's status as found (the cache's, or the one this process wrote, read in
	// its place): shared, never changed. The pass reports from it (what changed, a failure's
	// message no label holds); it decides nothing.
	Status any
	// TakenOn: the controller added rudder's finalizer for this pass. A pass acts on a
	// release only once the finalizer is written, so no pass acted before this one: unless
	// the cache of records shows a revision, the release is taken to be absent without a read
	// of storage (observed.assumed).
	TakenOn bool
}

// newPass is the pass over obj, as the controller read it.
func newPass(ctx context.Context, w *World, obj *unstructured.Unstructured, read Read) *pass {
	s := newSubject(ctx, w, obj)
	s.takenOn = read.TakenOn
	return &pass{observation: &observation{subject: s}, origStatus: read.Status, st: *s.read.DeepCopy()}
}

// What the steps of a pass share: the subject (the CR, fixed for the pass) and the
// observation (what observe found of it). Each step is a type of its own over them, defined
// in this file beneath the files of its methods: the observer fills the observation
// (observe.go, rollout.go), the actor takes the actions (actions.go, turn.go, nudge.go) and the
// ending it reaches (ending.go), the settler looks at the objects (objects.go), the reporter
// writes the status (report.go, record.go); the pass runs them in that order (run.go).

// subject is the CR a pass is over, the World that serves it, who acts for its release, and
// the CR's status as the pass read it. No step changes it.
type subject struct {
	w   *World
	obj *unstructured.Unstructured
	// log names the CR (controller-runtime's keys); lines add the release.
	log logr.Logger
	key types.NamespacedName
	gen int64
	// scope is who acts for the release (rudder, or the tenant's ServiceAccount) and where.
	scope helm.Scope
	// read is rudder's part of the CR's status as the pass read it: the conditions the steps
	// compare with, and what status.release reports.
	read rstatus.Common
	// takenOn: no pass acted on the CR before this one (see Read.TakenOn).
	takenOn bool
}

// newSubject is the pass's view of obj, whose status it parses.
func newSubject(ctx context.Context, w *World, obj *unstructured.Unstructured) *subject {
	s := &subject{w: w, obj: obj, log: logr.FromContextOrDiscard(ctx), key: client.ObjectKeyFromObject(obj),
		gen: obj.GetGeneration(), scope: w.Watch.Scope(obj, w.DefaultServiceAccount)}
	s.read.Conditions = rstatus.ConditionsOf(obj)
	s.read.ObservedGeneration, _, _ = unstructured.NestedInt64(obj.Object, "status", "observedGeneration")
	if m, ok, _ := unstructured.NestedMap(obj.Object, "status", "release"); ok {
		var rel rstatus.Release
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(m, &rel); err == nil {
			s.read.Release = &rel
		}
	}
	return s
}

// cond is a condition as the CR had it when the pass read it.
func (s *subject) cond(typ string) *metav1.Condition {
	return meta.FindStatusCondition(s.read.Conditions, typ)
}

// carried is the CR's values of the labels its shard selector names (see helm/shard.go).
func (s *subject) carried() map[string]string {
	keys := s.w.Carried
	if len(keys) == 0 {
		return nil
	}
	out := make(map[string]string, len(keys))
	for _, k := range keys {
		if v, ok := s.obj.GetLabels()[k]; ok {
			out[k] = v
		}
	}
	return out
}

// observation is what observe found: what the pass decides and acts from. The observer fills
// it; later steps read it, and only a read of the release (observeRelease) changes it.
type observation struct {
	*subject

	snap     *chartsource.Snapshot
	chartErr error // the chart on disk fails to load; snap is the last good version
	// chartDigest is what the release is made from: snap's digest with the watch's layers
	// (watches.Watch.ChartDigest); want.ChartDigest is its label form.
	chartDigest string
	relName     string
	values      map[string]any
	overridden  []string // watches.yaml overrideValues keys applied on top of the spec
	want        records.Desired
	held        *hook.Decision // a pre-release hook said "not now"
	release     observed
	// pin is where the watch's rollouts leave the CR (see rollout.go).
	pin pin
	// known are the release's facts as the pass found them (see facts).
	known *known
	// proof is what a release of the CR's name that rudder did not make showed of the CR
	// (nil: not read; see proveForeign).
	proof *helm.Proof
}

// known are a release's facts as a pass found them, with the message of the failure among
// them that Memory keeps with the facts of a release without a record ("": none, or the
// release has a record: no label holds a message).
type known struct {
	facts   records.Facts
	message string
}

// pin is where a rollout leaves a pass's CR.
type pin struct {
	// digest is the chart digest of the CR's own release, which the pass keeps ("": the CR
	// moves to the watch's chart).
	digest string
	// back is the revision a rollout that halted with onHalt rollback returns the release to
	// (0: none, or the release has no revision of an earlier chart).
	back int
	// cond is the CR's Rollout condition.
	cond *condition
}

// event records an Event on the CR and logs the same line (with the CR and the release), so
// that every release action and failure is in both.
func (ob *observation) event(n note) {
	ob.w.Recorder.Eventf(ob.obj, nil, n.typ, n.reason, n.action, "%s", n.message)
	// "release" is added per line, not with WithValues per pass: zap encodes WithValues eagerly,
	// a cost every idle pass would pay for lines it rarely writes.
	ob.log.Info(n.message, "release", ob.relName, "event", n.typ, "reason", n.reason, "action", n.action)
}

// observer is the first step of a pass: it fills the observation with what the pass decides
// from.
type observer struct{ *observation }

// actor is the second step of a pass: it takes the actions the release's state calls for, one
// at a time, each chosen by plan.Next, and folds their results into the outcome. It holds one
// of the namespace's action slots while it acts (turn.go), and prepares each action's
// environment (env): an action reaches nothing else.
type actor struct {
	*observation
	// out is the outcome the actions fold into (nil before act).
	out *outcome
	// ev is the environment of the pass's actions (see env).
	ev *env
	// acting: the pass holds one of its namespace's action slots (see takeTurn).
	acting bool
	// queued: the pass found its namespace's action slots taken and waits its turn.
	queued bool
	// reset: the pass acts on a new reset-at value (see nudges).
	reset bool
}

// ending is the end of the actor's run: what the pass ends on when plan.Next chooses no
// action (plan.Ending), from what the pass observed and what its actions left.
type ending struct{ *observation }

// settler is the step of a pass after its actions, on a revision: it looks at the revision's
// objects, restoring drift through the actor (the reapply action), and runs the
// post-release hooks.
type settler struct{ *actor }

// reporter is the last step of a pass: it turns the outcome into the status the pass writes
// (st), the Events, the rudder_release_state gauge and the controller-runtime Result.
type reporter struct {
	*observation
	st *rstatus.Common
}
