package machine

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	rstatus "github.com/rudder-operator/rudder/api/status"
	"github.com/rudder-operator/rudder/internal/helm"
	"github.com/rudder-operator/rudder/internal/plan"
	"github.com/rudder-operator/rudder/internal/records"
)

// actor is the step of a pass that acts: it walks plan.Next's choices one action at a time
// (walk), and folds each result into the outcome. The release's actions (act), a deleted CR's
// (Uninstall) and the one on a revision's objects (restore) are walks over the same loop,
// each from its own situation. It holds one of the namespace's action slots while it acts
// (turn), and prepares each action's environment (env): an action reaches nothing else.
type actor struct {
	sub *subject
	// ob reads the release as each action leaves it; obs is what the pass observed.
	ob  *observer
	obs *observation
	// ev is the environment of the pass's actions (see env).
	ev *env
	// turn is the pass's place with its namespace's action slots.
	turn turn
	// reset: the pass acts on a new reset-at value (see nudges).
	reset bool
}

// course is what a walk decides from.
type course struct {
	// situate is the situation of a step, for the release as the step before left it, with
	// what deciding on it needs read.
	situate func(ctx context.Context, rel observed, o *outcome) (observed, plan.Situation, error)
	// turns: an action waits for one of the namespace's action slots.
	turns bool
}

// stop is where a walk stopped: on plan.Next's ending (how, for the release as rel has it
// and the situation s it decided from), in the queue for an action slot (queued), on an
// action's retry or block (res), or on a failed look at the release (err).
type stop struct {
	rel    observed
	s      plan.Situation
	how    plan.Ending
	queued bool
	res    *result
	err    error
}

// maxSteps bounds the actions of one walk, beyond the rule that each is taken at most once.
const maxSteps = 12

// act takes the actions the release's state calls for, and ends the outcome on what the walk
// stopped on.
func (ac *actor) act(ctx context.Context) *outcome {
	o := &outcome{}
	o.add(nil, recordedFacts(ac.sub, ac.obs.facts, ac.obs.heldBack, ac.obs.tested))
	if rec, reset := nudges(ac.sub, ac.obs.facts); rec != nil {
		o.add(nil, result{record: *rec})
		o.nudged, ac.reset = true, reset
	}
	if c := ac.obs.pin.cond; c != nil {
		o.add(nil, result{conditions: map[string]*condition{rstatus.TypeRollout: c}})
	}
	st := ac.walk(ctx, course{situate: ac.situate, turns: true}, ac.obs.release, o)
	switch {
	case st.queued:
	case st.err != nil:
		o.endOn(ac.afterFailure(o, st.err))
	case st.res != nil:
		o.end(*st.res) // folded already, as its action's
	default:
		o.newest, o.ended = st.rel.head, true
		res := ending{ac.sub, ac.obs}.resultOf(st.how, st.rel, st.s, o)
		if st.how == plan.EndLast {
			o.end(res) // folded already, as its action's
		} else {
			o.endOn(res)
		}
	}
	return o
}

// situate is the situation of a pass over a CR that is not deleted.
func (ac *actor) situate(ctx context.Context, rel observed, o *outcome) (observed, plan.Situation, error) {
	rel, err := ac.ob.closer(ctx, rel, o)
	if err != nil {
		return rel, plan.Situation{}, err
	}
	return rel, situation(ac.sub, ac.obs, rel, o), nil
}

// walk takes the actions plan.Next chooses from c's situations, one at a time, from the
// release as rel has it, until it chooses none or an action stops the walk.
func (ac *actor) walk(ctx context.Context, c course, rel observed, o *outcome) stop {
	for range maxSteps {
		var s plan.Situation
		var err error
		if rel, s, err = c.situate(ctx, rel, o); err != nil {
			return stop{err: err}
		}
		choice, how := plan.Next(s)
		if choice.None() {
			return stop{rel: rel, s: s, how: how}
		}
		if c.turns && !ac.turn.claim(ac.sub.w, ac.sub.key, o) {
			return stop{queued: true}
		}
		res := ac.take(ctx, choice, rel, o)
		if res.verdict == retry || res.verdict == blocked {
			return stop{res: &res}
		}
		if rel, err = ac.after(ctx, res); err != nil {
			return stop{err: err}
		}
	}
	err := fmt.Errorf("release %s: more than %d actions in one pass", ac.obs.relName, maxSteps)
	return stop{res: &result{verdict: retry, reason: rstatus.ReasonReconcileError, err: err}}
}

// restore takes the action on the objects of the revision o ended on, which drifted or may
// have: plan.Next chooses it (reapply, once) from the situation of drift.
func (ac *actor) restore(ctx context.Context, o *outcome) error {
	drift := func(_ context.Context, rel observed, o *outcome) (observed, plan.Situation, error) {
		return rel, plan.Situation{DriftDue: true, Taken: o.taken}, nil
	}
	st := ac.walk(ctx, course{situate: drift}, observed{head: o.head, rel: o.rel}, o)
	if st.res != nil {
		return st.res.err
	}
	return st.err
}

// take runs the action that carries out c through do. A choice no action carries out (none
// of those plan.Next makes) is a retry of the pass.
func (ac *actor) take(ctx context.Context, c plan.Choice, rel observed, o *outcome) result {
	a, ok := ac.choose(ctx, c, rel, o)
	if !ok {
		return result{verdict: retry, reason: rstatus.ReasonReconcileError, err: fmt.Errorf("release %s: no action carries out %q",
			ac.obs.relName, c.Action)}
	}
	return ac.do(ctx, a, rel, o)
}

// do runs one action and folds its result into the outcome.
func (ac *actor) do(ctx context.Context, a action, rel observed, o *outcome) result {
	w := ac.sub.w
	start := time.Now()
	res := a.run(ctx, ac.env(), rel)
	actionSeconds.WithLabelValues(w.label(), string(a.name()), res.verdict.label()).Observe(time.Since(start).Seconds())
	countAction(w.label(), a.name(), res.call)
	if res.restored > 0 {
		driftCorrections.WithLabelValues(w.label()).Add(float64(res.restored))
	}
	if res.recheck {
		w.Memory.MarkDirty(ac.sub.key)
	}
	o.add(a, res)
	return res
}

// after is the release as the action of res left it: as it says, as the revision it made, or
// read from storage; classified anew.
func (ac *actor) after(ctx context.Context, res result) (observed, error) {
	switch {
	case res.after != nil:
		rel := *res.after
		rel.state = ac.ob.classify(rel.head, rel.rel).state
		return rel, nil
	case res.made != nil:
		return ac.ob.classify(records.HeadOf(res.made), res.made), nil
	}
	return ac.ob.readRelease(ctx, true)
}

// afterFailure ends a pass whose look at the release failed: on the failure this pass met,
// retried with what the look says (the next pass remedies it), or as a retry of its own.
func (ac *actor) afterFailure(o *outcome, err error) result {
	if f := o.failure; f != nil {
		res := f.result
		msg := fmt.Sprintf("%s; reading the release's history to go on: %v", res.message, err)
		if res.forbidden {
			return forbidden(ac.sub.scope, eventAction(f.action), msg)
		}
		return result{verdict: retry, reason: res.reason, err: errors.New(msg)}
	}
	return result{verdict: retry, reason: rstatus.ReasonReconcileError, err: err}
}

// choose is the action that carries out c, with what it needs: the request of an install or
// upgrade, the failure a rollback remedies, the objects drift is restored on, the rollout
// that halted, the proof of a release another operator made.
func (ac *actor) choose(ctx context.Context, c plan.Choice, rel observed, o *outcome) (action, bool) {
	switch c.Action {
	case plan.Install:
		return install{ac.prepare(ctx, plan.Install, o)}, true
	case plan.Upgrade:
		return upgrade{ac.prepare(ctx, plan.Upgrade, o)}, true
	case plan.Rollback:
		return rollback{to: c.To, cause: o.failure}, true
	case plan.RequestRollback:
		return requestRollback{value: c.Value, target: ac.obs.rollbackTarget}, true
	case plan.RolloutRollback:
		return rolloutRollback{to: c.To, rollout: ac.sub.w.rolloutName(ac.obs.want.ChartDigest)}, true
	case plan.Test:
		return test{revision: c.To, again: rel.head != nil && rel.head.Revision == c.To && rel.head.Tested() != ""}, true
	case plan.Reapply:
		objs, serverSide, err := ac.ob.wholeObjects(ctx, o, rel)
		return reapply{objects: objs, serverSide: serverSide, readErr: err}, true
	case plan.AdoptRelease:
		if rel.proof == nil {
			return nil, false
		}
		chart := ""
		if snap := ac.obs.snap; snap != nil && ac.obs.chartDigest == snap.Digest {
			chart = helm.ChartFingerprint(snap.Chart)
		}
		return adoptRelease{proof: rel.proof, chart: chart}, true
	}
	a, ok := plain[c.Action]
	return a, ok
}

// plain are the actions that need nothing but their environment.
var plain = map[plan.Action]action{plan.Unlock: unlock{}, plan.Supersede: supersede{}, plan.Adopt: adopt{},
	plan.FinishUninstall: finishUninstall{}, plan.RemoveFailed: removeFailedInstall{}, plan.Uninstall: uninstall{}, plan.LetGo: letGo{}}

// env is the environment of the pass's actions.
func (ac *actor) env() *env {
	if ac.ev != nil {
		return ac.ev
	}
	sub, w := ac.sub, ac.sub.w
	e := &env{mapper: w.Mapper, helm: w.Helm.acting(), scope: sub.scope, release: ac.obs.relName, key: sub.key, kind: w.gvk().Kind,
		gen: sub.gen, want: ac.obs.want, watch: w.Watch, clock: w.Clock, log: sub.log, live: w.Live, carriedKeys: w.Carried,
		carried: sub.carried(), memory: w.Memory}
	if held := ac.obs.heldBack; held != nil {
		e.held = held
		if !ac.reset {
			e.failures = failures(held)
		}
	}
	ac.ev = e
	return e
}

// prepare builds the Helm request of an install or upgrade, after the checks that need no
// cluster: the values against the chart's schema, and the Event that overrideValues applied;
// or the result to end on instead when there is no request to make. o is what the pass did so
// far.
func (ac *actor) prepare(ctx context.Context, action plan.Action, o *outcome) prepared {
	obs := ac.obs
	pinned, err := ac.ob.pinnedRelease(ctx)
	if err != nil {
		return prepared{stop: &result{verdict: retry, reason: rstatus.ReasonReconcileError, err: err}}
	}
	ch := obs.snap.Chart
	if pinned != nil {
		ch = helm.ChartOf(pinned) // a release decoded for this pass alone: a private copy
	}
	if err := helm.ValidateValues(ch, obs.values); err != nil {
		msg := "values do not match the chart's values.schema.json: " + err.Error()
		return prepared{stop: &result{verdict: blocked, reason: rstatus.ReasonValuesInvalid, message: msg,
			released: &condition{metav1.ConditionFalse, rstatus.ReasonValuesInvalid, msg}}}
	}
	var pre []note
	if len(obs.overridden) > 0 {
		pre = append(pre, note{corev1.EventTypeNormal, "OverrideApplied", "Render",
			"watches.yaml overrideValues set " + strings.Join(obs.overridden, ", ") + " on top of the spec"})
	}
	if pinned == nil {
		if ch, err = obs.snap.Fresh(); err != nil {
			return prepared{stop: &result{verdict: retry, reason: rstatus.ReasonReconcileError, err: err}}
		}
	}
	sub, w, gen := ac.sub, ac.sub.w, ac.sub.gen
	req := w.Watch.Request(sub.obj, sub.scope, obs.relName, ch, obs.chartDigest, obs.values, obs.want.ValuesDigest,
		helm.Description(string(action), gen, ch, obs.chartDigest, obs.want.ValuesDigest, obs.overridden))
	req.Carried = sub.carried()
	// The release's facts as the new revision leaves them if it is made (no failure held
	// back, made from this generation and chart), so that a pass that makes it writes no more;
	// a pass that fails writes the failure after (markRecord).
	f := factsAfter(obs.facts, o)
	failed := f
	f.Failed, f.Applied = nil, &records.Applied{Generation: gen, ChartDigest: obs.want.ChartDigest}
	req.Facts = &f
	// As Helm leaves it failed: one failure of the pair more (see failedRecord).
	e := ac.env()
	cause := rstatus.ReasonUpgradeFailed
	if action == plan.Install {
		cause = rstatus.ReasonInstallFailed
	}
	failed.Failed = &records.Failure{ChartDigest: obs.want.ChartDigest, ValuesDigest: obs.want.ValuesDigest, Cause: records.Cause(cause),
		Count: e.failures + 1, At: e.clock.Now()}
	req.FailedFacts = &failed
	return prepared{req: req, pre: pre}
}

// countAction counts an action's work in rudder_release_actions_total: for every action, in
// do.
func countAction(gvk string, action plan.Action, c callResult) {
	if c != callNone {
		releaseActions.WithLabelValues(gvk, string(action), c.label()).Inc()
	}
}
