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
	"github.com/rudder-operator/rudder/internal/release"
)

// countAction counts an action's work in rudder_release_actions_total: for every action, in
// do.
func countAction(gvk string, action plan.Action, c callResult) {
	if c != callNone {
		releaseActions.WithLabelValues(gvk, string(action), c.label()).Inc()
	}
}

// act takes the actions the release's state calls for, one at a time, until next says the
// pass ends.
func (ac *actor) act(ctx context.Context) *outcome {
	o := &outcome{}
	ac.out = o
	o.add(nil, ac.recordedFacts(ctx))
	o.nudged = ac.nudges(o)
	if c := ac.pin.cond; c != nil {
		o.add(nil, result{conditions: map[string]*condition{rstatus.TypeRollout: c}})
	}
	obs := ac.release
	for range maxSteps {
		s, err := ac.situation(ctx, obs, o)
		if err != nil {
			o.endOn(ac.afterFailure(o, err))
			return o
		}
		c, how := plan.Next(s)
		if c.None() {
			o.newest, o.ended = obs.head, true
			if res := (&ending{ac.observation}).result(ctx, how, obs, s, o); how == plan.EndLast {
				o.end(res) // folded already, as its action's
			} else {
				o.endOn(res)
			}
			return o
		}
		if !ac.takeTurn(o) {
			return o
		}
		res := ac.take(ctx, c, obs, o)
		if res.verdict == retry || res.verdict == blocked {
			o.end(res)
			return o
		}
		if obs, err = ac.after(ctx, res); err != nil {
			o.endOn(ac.afterFailure(o, err))
			return o
		}
	}
	o.endOn(result{verdict: retry, reason: rstatus.ReasonReconcileError, err: fmt.Errorf("release %s: more than %d actions in one pass",
		ac.relName, maxSteps)})
	return o
}

// take runs the action that carries out c (see runner) through do, an install or upgrade with
// the request prepared for it. A choice no action carries out (none of those plan.Next makes)
// is a retry of the pass.
func (ac *actor) take(ctx context.Context, c plan.Choice, obs observed, o *outcome) result {
	a, ok := ac.runner(c, o)
	if !ok {
		return result{verdict: retry, reason: rstatus.ReasonReconcileError, err: fmt.Errorf("release %s: no action carries out %q", ac.relName,
			c.Action)}
	}
	switch r := a.(type) {
	case install:
		r.prepared = ac.prepare(ctx, plan.Install)
		a = r
	case upgrade:
		r.prepared = ac.prepare(ctx, plan.Upgrade)
		a = r
	}
	return ac.do(ctx, a, obs, o)
}

// do runs one action and folds its result into the outcome.
func (ac *actor) do(ctx context.Context, a action, obs observed, o *outcome) result {
	start := time.Now()
	res := a.run(ctx, ac.env(), obs)
	actionSeconds.WithLabelValues(ac.w.label(), string(a.name()), res.verdict.label()).Observe(time.Since(start).Seconds())
	countAction(ac.w.label(), a.name(), res.call)
	if res.restored > 0 {
		driftCorrections.WithLabelValues(ac.w.label()).Add(float64(res.restored))
	}
	if res.recheck {
		ac.w.Memory.MarkDirty(ac.key)
	}
	o.add(a, res)
	return res
}

// after is the release as the action of res left it: as it says, as the revision it made, or
// read from storage.
func (ac *actor) after(ctx context.Context, res result) (observed, error) {
	switch {
	case res.after != nil:
		return *res.after, nil
	case res.made != nil:
		h := records.HeadOf(res.made)
		return observed{head: h, rel: res.made, state: records.DetermineState(h, ac.want)}, nil
	}
	return ac.observeRelease(ctx, true)
}

// afterFailure ends a pass whose look at the release failed: on the failure this pass met,
// retried with what the look says (the next pass remedies it), or as a retry of its own.
func (ac *actor) afterFailure(o *outcome, err error) result {
	if f := o.failure; f != nil {
		res := f.result
		msg := fmt.Sprintf("%s; reading the release's history to go on: %v", res.message, err)
		if res.forbidden {
			return forbidden(ac.scope, eventAction(f.action), msg)
		}
		return result{verdict: retry, reason: res.reason, err: errors.New(msg)}
	}
	return result{verdict: retry, reason: rstatus.ReasonReconcileError, err: err}
}

// runner is the action that carries out c, with what the pass met that it needs (the failure a
// rollback remedies, the objects drift is restored on, the rollout that halted).
func (ac *actor) runner(c plan.Choice, o *outcome) (action, bool) {
	var a action
	switch c.Action {
	case plan.Install:
		a = install{}
	case plan.Upgrade:
		a = upgrade{}
	case plan.Rollback:
		a = rollback{to: c.To, cause: o.failure}
	case plan.RequestRollback:
		a = requestRollback{value: c.Value}
	case plan.RolloutRollback:
		a = rolloutRollback{to: c.To, rollout: ac.w.rolloutName(ac.want.ChartDigest)}
	case plan.Test:
		a = test{revision: c.To}
	case plan.Unlock:
		a = unlock{}
	case plan.Supersede:
		a = supersede{}
	case plan.Adopt:
		a = adopt{}
	case plan.FinishUninstall:
		a = finishUninstall{}
	case plan.RemoveFailed:
		a = removeFailedInstall{}
	case plan.Reapply:
		a = reapply{objects: o.objects, whole: o.whole, serverSide: o.serverSide}
	case plan.Uninstall:
		a = uninstall{}
	case plan.LetGo:
		a = letGo{}
	case plan.AdoptRelease:
		if ac.proof == nil {
			return nil, false
		}
		chart := ""
		if ac.snap != nil && ac.chartDigest == ac.snap.Digest {
			chart = helm.ChartFingerprint(ac.snap.Chart)
		}
		a = adoptRelease{proof: ac.proof, chart: chart}
	}
	return a, a != nil
}

// env is the environment of the pass's actions.
func (ac *actor) env() *env {
	if ac.ev != nil {
		return ac.ev
	}
	e := &env{mapper: ac.w.Mapper, helm: ac.w.Helm, scope: ac.scope, release: ac.relName, key: ac.key, kind: ac.w.gvk().Kind, gen: ac.gen,
		want:  ac.want,
		watch: ac.w.Watch, clock: ac.w.Clock, log: ac.log, live: ac.w.Live, carriedKeys: ac.w.Carried, carried: ac.carried(),
		memory: ac.w.Memory}
	if held, ok := ac.heldBackFailure(); ok {
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
// or the result to end on instead when there is no request to make.
func (ac *actor) prepare(ctx context.Context, action plan.Action) prepared {
	pinned, err := ac.pinnedRelease(ctx)
	if err != nil {
		return prepared{stop: &result{verdict: retry, reason: rstatus.ReasonReconcileError, err: err}}
	}
	chrt := ac.snap.Chart
	if pinned != nil {
		chrt = helm.ChartOf(pinned)
	}
	if err := helm.ValidateValues(chrt, ac.values); err != nil {
		msg := "values do not match the chart's values.schema.json: " + err.Error()
		return prepared{stop: &result{verdict: blocked, reason: rstatus.ReasonValuesInvalid, message: msg,
			released: &condition{metav1.ConditionFalse, rstatus.ReasonValuesInvalid, msg}}}
	}
	var pre []note
	if len(ac.overridden) > 0 {
		pre = append(pre, note{corev1.EventTypeNormal, "OverrideApplied", "Render",
			"watches.yaml overrideValues set " + strings.Join(ac.overridden, ", ") + " on top of the spec"})
	}
	ch := chrt // a release decoded for this pass alone: a private copy
	if pinned == nil {
		if ch, err = ac.snap.Fresh(); err != nil {
			return prepared{stop: &result{verdict: retry, reason: rstatus.ReasonReconcileError, err: err}}
		}
	}
	req := ac.w.Watch.Request(ac.obj, ac.scope, ac.relName, ch, ac.chartDigest, ac.values, ac.want.ValuesDigest,
		helm.Description(string(action), ac.gen, ch, ac.chartDigest, ac.want.ValuesDigest, ac.overridden))
	req.Carried = ac.carried()
	// The release's facts as the new revision leaves them if it is made (no failure held
	// back, made from this generation and chart), so that a pass that makes it writes no more;
	// a pass that fails writes the failure after (markRecord).
	f := ac.factsAfter(ac.out)
	failed := f
	f.Failed, f.Applied = nil, &records.Applied{Generation: ac.gen, ChartDigest: ac.want.ChartDigest}
	req.Facts = &f
	// As Helm leaves it failed: one failure of the pair more (see failedRecord).
	e := ac.env()
	cause := rstatus.ReasonUpgradeFailed
	if action == plan.Install {
		cause = rstatus.ReasonInstallFailed
	}
	failed.Failed = &records.Failure{ChartDigest: ac.want.ChartDigest, ValuesDigest: ac.want.ValuesDigest, Cause: records.Cause(cause),
		Count: e.failures + 1, At: e.clock.Now()}
	req.FailedFacts = &failed
	return prepared{req: req, pre: pre}
}

// pinnedRelease is the release the pass takes the chart of when a rollout keeps the CR on its
// own release's chart (nil: the watch's chart).
func (ac *actor) pinnedRelease(ctx context.Context) (*release.Release, error) {
	if ac.pin.digest == "" {
		return nil, nil
	}
	if rel := ac.release.rel; rel != nil && helm.ChartOf(rel) != nil && records.HeadOf(rel).ChartDigest == ac.pin.digest {
		return rel, nil
	}
	rel, err := ac.w.Helm.Last(ctx, ac.scope, ac.relName)
	if err != nil {
		return nil, err
	}
	if rel == nil || helm.ChartOf(rel) == nil || records.HeadOf(rel).ChartDigest != ac.pin.digest {
		return nil, fmt.Errorf("release %s: its newest revision no longer holds chart %s", ac.relName, records.DisplayDigest(ac.pin.digest))
	}
	return rel, nil
}
