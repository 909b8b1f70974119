package controllers

import (
	"context"
	"errors"
	"fmt"
	"time"

	"helm.sh/helm/v3/pkg/release"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	rstatus "github.com/rudder-operator/rudder/api/status"
	"github.com/rudder-operator/rudder/internal/plan"
	"github.com/rudder-operator/rudder/internal/records"
)

// An action is one thing a pass does to a release, or to the objects of its revision
// (reapply). It does that one thing and says how it went, as data: what follows is plan.Next's
// to decide, and what the CR is told is report's (report.go).
type action interface {
	// name names the action: its Events, its metric label, its key in plan.Situation.Taken.
	name() plan.Action
	run(ctx context.Context, e *env, obs observed) result
}

// verdict is how an action ended.
type verdict int

const (
	// succeeded: it did what it does; the pass decides again from what it left.
	succeeded verdict = iota
	// failed: it failed for what the CR and the chart want, or the API server refused the
	// release's identity (result.forbidden); the pass decides again: the remedy (removing a
	// failed install, a rollback) or the end.
	failed
	// retry: a transient failure; the pass ends and is retried with back-off.
	retry
	// blocked: it may not act: the pass ends, Stalled until the CR, the chart or the cluster
	// changes (values that do not validate, another owner's release), or, with
	// result.requeue, waiting for something else (another operation) and looking again then.
	blocked
)

// label is the verdict as the result label of rudder_release_action_duration_seconds.
func (v verdict) label() string {
	switch v {
	case succeeded:
		return "ok"
	case failed:
		return "failed"
	case retry:
		return "retry"
	}
	return "blocked"
}

// result is what an action (or the end of a pass) reports.
type result struct {
	verdict verdict
	// reason and message say why: the reason Released, Stalled or Ready give when the result
	// ends the pass. err is the error a retry returns to controller-runtime.
	reason, message string
	err             error
	// forbidden: the API server refused the release's identity. Such a failure is remedied
	// like any other but never held back: granting the rule recovers without a change.
	forbidden bool
	// released is Released as the action leaves it (nil: unchanged), and conditions the
	// other condition types it sets (RollbackRequest, Tested, …); notes are its Events.
	released   *condition
	conditions map[string]*condition
	notes      []note
	requeue    time.Duration
	// after is the release as the action left it when the action knows it (nil: the pass
	// reads storage).
	after *observed
	// made is the revision an install or upgrade made, and objects what Helm's client knew of
	// its objects (see helm.Request.Objects).
	made    *release.Release
	objects []*unstructured.Unstructured
	// record is what status.release learns.
	record record
	// phase is what the pass ended in when a succeeded result ends it; head and rel the
	// revision it ended on (nil: none), whose objects the pass then looks at.
	phase phase
	head  *records.Head
	rel   *release.Release
	// recheck: the objects are looked at again by every pass until one finds them as the
	// manifest has them (a reapply that failed); restored is how many objects it restored.
	recheck  bool
	restored int
	// call is how the action's own work went, as rudder_release_actions_total counts it (do
	// counts it, for every action): its Helm call, or the writes it made (callNone: it found
	// nothing to do, as a supersede with nothing to mark, or met no call at all).
	call callResult
}

// callResult is how an action's work went.
type callResult int

const (
	callNone callResult = iota
	callOK
	callFailed
)

// callOf is the callResult of an action's work that ended in err.
func callOf(err error) callResult {
	if err != nil {
		return callFailed
	}
	return callOK
}

// countAction counts an action's work in rudder_release_actions_total: for every action, from
// do, and for the uninstall of a deleted CR.
func countAction(gvk string, action plan.Action, c callResult) {
	if c != callNone {
		releaseActions.WithLabelValues(gvk, string(action), c.label()).Inc()
	}
}

// label is the result label of rudder_release_actions_total.
func (c callResult) label() string {
	if c == callFailed {
		return "failed"
	}
	return "ok"
}

// step is an action a pass took and its result.
type step struct {
	action action
	result result
}

// maxSteps bounds the actions of one pass, beyond the rule that each is taken at most once.
const maxSteps = 12

// act takes the actions the release's state calls for, one at a time, until next says the
// pass ends.
func (p *pass) act(ctx context.Context) *outcome {
	o := &outcome{}
	o.add(nil, p.shadowed())
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
		a, ok := p.runner(c, o)
		if !ok {
			o.endOn(result{verdict: retry, reason: rstatus.ReasonReconcileError, err: fmt.Errorf("release %s: no action carries out %q", p.relName, c.Action)})
			return o
		}
		res := p.do(ctx, a, obs, o)
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

// do runs one action and folds its result into the outcome.
func (p *pass) do(ctx context.Context, a action, obs observed, o *outcome) result {
	start := time.Now()
	res := a.run(ctx, p.env(), obs)
	actionSeconds.WithLabelValues(p.r.gvkLabel(), string(a.name()), res.verdict.label()).Observe(time.Since(start).Seconds())
	countAction(p.r.gvkLabel(), a.name(), res.call)
	if res.restored > 0 {
		driftCorrections.WithLabelValues(p.r.gvkLabel()).Add(float64(res.restored))
	}
	if res.recheck {
		p.r.markDirty(p.key)
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
