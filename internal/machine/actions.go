package machine

import (
	"context"
	"errors"
	"fmt"
	"time"

	rstatus "github.com/rudder-operator/rudder/api/status"
	"github.com/rudder-operator/rudder/internal/plan"
	"github.com/rudder-operator/rudder/internal/records"
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
func (p *pass) act(ctx context.Context) *outcome {
	o := &outcome{}
	p.out = o
	o.add(nil, p.recordedFacts(ctx))
	o.nudged = p.nudges(o)
	if c := p.pin.cond; c != nil {
		o.add(nil, result{conditions: map[string]*condition{rstatus.TypeRollout: c}})
	}
	obs := p.release
	for range maxSteps {
		s, err := p.situation(ctx, obs, o)
		if err != nil {
			o.endOn(p.afterFailure(o, err))
			return o
		}
		c, how := plan.Next(s)
		if c.None() {
			o.newest, o.ended = obs.head, true
			if res := p.finish(ctx, how, obs, s, o); how == plan.EndLast {
				o.end(res) // folded already, as its action's
			} else {
				o.endOn(res)
			}
			return o
		}
		if !p.takeTurn(o) {
			return o
		}
		res := p.take(ctx, c, obs, o)
		if res.verdict == retry || res.verdict == blocked {
			o.end(res)
			return o
		}
		if obs, err = p.after(ctx, res); err != nil {
			o.endOn(p.afterFailure(o, err))
			return o
		}
	}
	o.endOn(result{verdict: retry, reason: rstatus.ReasonReconcileError, err: fmt.Errorf("release %s: more than %d actions in one pass", p.relName, maxSteps)})
	return o
}

// take runs the action that carries out c (see runner) through do. A choice no action carries
// out (none of those plan.Next makes) is a retry of the pass.
func (p *pass) take(ctx context.Context, c plan.Choice, obs observed, o *outcome) result {
	a, ok := p.runner(c, o)
	if !ok {
		return result{verdict: retry, reason: rstatus.ReasonReconcileError, err: fmt.Errorf("release %s: no action carries out %q", p.relName, c.Action)}
	}
	return p.do(ctx, a, obs, o)
}

// do runs one action and folds its result into the outcome.
func (p *pass) do(ctx context.Context, a action, obs observed, o *outcome) result {
	start := time.Now()
	res := a.run(ctx, p.env(), obs)
	actionSeconds.WithLabelValues(p.w.label(), string(a.name()), res.verdict.label()).Observe(time.Since(start).Seconds())
	countAction(p.w.label(), a.name(), res.call)
	if res.restored > 0 {
		driftCorrections.WithLabelValues(p.w.label()).Add(float64(res.restored))
	}
	if res.recheck {
		p.w.Memory.MarkDirty(p.key)
	}
	o.add(a, res)
	return res
}

// after is the release as the action of res left it: as it says, as the revision it made, or
// read from storage.
func (p *pass) after(ctx context.Context, res result) (observed, error) {
	switch {
	case res.after != nil:
		return *res.after, nil
	case res.made != nil:
		h := records.HeadOf(res.made)
		return observed{head: h, rel: res.made, state: records.DetermineState(h, p.want)}, nil
	}
	return p.observeRelease(ctx, true)
}

// afterFailure ends a pass whose look at the release failed: on the failure this pass met,
// retried with what the look says (the next pass remedies it), or as a retry of its own.
func (p *pass) afterFailure(o *outcome, err error) result {
	if f := o.failure; f != nil {
		res := f.result
		msg := fmt.Sprintf("%s; reading the release's history to go on: %v", res.message, err)
		if res.forbidden {
			return p.forbidden(eventAction(f.action), msg)
		}
		return result{verdict: retry, reason: res.reason, err: errors.New(msg)}
	}
	return result{verdict: retry, reason: rstatus.ReasonReconcileError, err: err}
}

// finish is the result a pass ends on when no action is left.
func (p *pass) finish(ctx context.Context, how plan.Ending, obs observed, s plan.Situation, o *outcome) result {
	switch how {
	case plan.EndHeld:
		return p.hold(obs)
	case plan.EndInSync:
		return p.inSync(obs.head)
	case plan.EndRolledBack:
		return p.keepRollback(ctx, obs, o)
	case plan.EndConflict:
		return p.conflict(obs.rel)
	case plan.EndHeldBack:
		return p.holdBack(obs, s, o)
	case plan.EndWaiting:
		return p.waitForOperation(obs.rel)
	case plan.EndRetrying:
		return p.retryLater(o)
	}
	if made := o.madeStep(); made != nil {
		return made.result
	}
	if last := o.last(); last != nil {
		return last.result
	}
	return result{verdict: retry, reason: rstatus.ReasonReconcileError, err: fmt.Errorf("release %s: the pass ended with nothing to report", p.relName)}
}
