package controllers

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	rolloutv1 "github.com/rudder-operator/rudder/api/rollout/v1alpha1"
	"github.com/rudder-operator/rudder/internal/machine"
	"github.com/rudder-operator/rudder/internal/records"
	"github.com/rudder-operator/rudder/internal/watches"
)

// waveSteps are the coordinator's steps of one watch's rollout from wave to wave: decisions
// over the Rollout's status and its members, which they change in place, and the CRs they leave
// to queue a pass of once the coordinator has written the status (moving).
type waveSteps struct {
	r *Reconciler
	// moving are the CRs to queue a pass of once the Rollout is written (see move).
	moving map[types.NamespacedName]bool
	// movedAt is when the coordinator first saw each CR of the current rollout on its chart,
	// which its health timeout counts from (a restart starts the count anew: more time, never
	// less).
	movedAt    map[types.NamespacedName]time.Time
	movedAtFor string
}

// move asks for a pass of the CR at key once the Rollout's status is written: the pass reads
// the Rollout to know whether the CR moves.
func (c *waveSteps) move(key types.NamespacedName) {
	if c.moving == nil {
		c.moving = map[types.NamespacedName]bool{}
	}
	c.moving[key] = true
}

// advance moves the rollout ro on as far as its gates allow, and says when to look again
// (0: not before an event: a chart edit, an annotation of the Rollout).
func (c *waveSteps) advance(ro *rolloutv1.Rollout, members []member) time.Duration {
	r, st := c.r, &ro.Status
	ann := ro.GetAnnotations()
	c.count(ro, members)
	if st.Phase == "" {
		st.Phase = rolloutv1.PhaseProgressing
	}
	switch st.Phase {
	case rolloutv1.PhaseProgressing, rolloutv1.PhasePaused:
		if ann[rolloutv1.AnnotationAbort] == "true" {
			c.halt(ro, members, "aborted: the Rollout's "+rolloutv1.AnnotationAbort+" annotation says so")
			return c.advance(ro, members)
		}
	}
	switch st.Phase {
	case rolloutv1.PhaseHalted:
		return c.goBack(ro, members)
	case rolloutv1.PhasePaused:
		if !c.resume(ro) {
			return 0
		}
	case rolloutv1.PhaseProgressing:
		if ann[rolloutv1.AnnotationPaused] == "true" {
			st.Phase = rolloutv1.PhasePaused
			st.Message = "paused: set the " + rolloutv1.AnnotationPaused + " annotation to \"false\" (or remove it) to go on"
			r.event(ro, corev1.EventTypeNormal, rolloutv1.PhasePaused, "Rollout", "paused at wave %d by the %s annotation", st.Wave,
				rolloutv1.AnnotationPaused)
			return 0
		}
	default: // Complete, RolledBack, Superseded
		return 0
	}
	if st.Wave == 0 {
		c.startWave(ro, members, 1)
	}
	return c.gate(ro, members)
}

// goBack follows a halted rollout: with onHalt rollback, until no moved CR is left on its
// chart (then it is RolledBack).
func (c *waveSteps) goBack(ro *rolloutv1.Rollout, members []member) time.Duration {
	r, st := c.r, &ro.Status
	if !r.opts.Watch.Rollout.RollsBack() {
		return 0
	}
	going := 0
	for _, m := range members {
		if m.digest == ro.Spec.To && !m.kept {
			going++
			c.move(m.key)
		}
	}
	why := "aborted"
	if st.Failed > 0 {
		why = fmt.Sprintf("%d CRs failed: %s", st.Failed, strings.Join(st.FailedCRs, "; "))
	}
	if going > 0 {
		st.Message = fmt.Sprintf("halted (%s); %d CRs still go back to an earlier chart (onHalt rollback)", why, going)
		return coordinatorPoll
	}
	st.Phase, st.Message = rolloutv1.PhaseRolledBack, fmt.Sprintf("halted (%s); every moved CR is back on a revision of an earlier chart", why)
	rollouts.WithLabelValues(r.gvkLabel(), rolloutv1.PhaseRolledBack).Inc()
	r.event(ro, corev1.EventTypeNormal, rolloutv1.PhaseRolledBack, "Rollout", "%s", st.Message)
	return 0
}

// resume reports whether a paused rollout goes on: its rudder.dev/paused annotation is not
// "true" and, for a policy that starts paused, its preview is recorded.
func (c *waveSteps) resume(ro *rolloutv1.Rollout) bool {
	r, st, ann := c.r, &ro.Status, ro.GetAnnotations()
	preview, previewed := ann[rolloutv1.AnnotationPreview]
	switch {
	case r.opts.Watch.Rollout.Paused && !previewed && ann[rolloutv1.AnnotationPaused] == "true":
		st.Message = "paused until its preview is recorded (rudder diff --cluster --record with the edited chart), then until the " +
			rolloutv1.AnnotationPaused + " annotation is set to \"false\""
		return false
	case r.opts.Watch.Rollout.Paused && !previewed:
		st.Message = "approved, but paused until its preview is recorded (rudder diff --cluster --record with the edited chart)"
		return false
	case ann[rolloutv1.AnnotationPaused] == "true":
		st.Message = "paused: set the " + rolloutv1.AnnotationPaused + " annotation to \"false\" (or remove it) to go on"
		if previewed {
			st.Message += "; preview: " + preview
		}
		return false
	}
	st.Phase = rolloutv1.PhaseProgressing
	r.event(ro, corev1.EventTypeNormal, "Resumed", "Rollout", "resumed at wave %d", max(st.Wave, 1))
	return true
}

// gate checks the current wave: its failures against the budget, then whether every CR it
// admitted is Ready and has settled, and starts the next wave or completes the rollout.
func (c *waveSteps) gate(ro *rolloutv1.Rollout, members []member) time.Duration {
	r, st := c.r, &ro.Status
	pol := r.opts.Watch.Rollout
	now := r.opts.Clock.Now()
	admitted, ready, failed := c.tally(ro, members, now)
	st.Failed, st.FailedCRs = int32(len(failed)), failed[:min(len(failed), maxFailedNamed)]
	if len(failed) > pol.MaxFailures {
		c.halt(ro, members, fmt.Sprintf("%d CRs failed in wave %d, more than rollout.maxFailures %d: %s", len(failed), st.Wave, pol.MaxFailures,
			strings.Join(st.FailedCRs, "; ")))
		return c.advance(ro, members)
	}
	promote := ro.GetAnnotations()[rolloutv1.AnnotationPromote]
	promoted := promote != "" && promote != st.Promoted
	if ready < admitted && !promoted {
		st.ReadySince = nil
		st.Message = fmt.Sprintf("wave %d of %d: %d of %d CRs Ready on chart %s", st.Wave, len(c.waves()), ready, admitted,
			records.DisplayDigest(ro.Spec.To))
		return coordinatorPoll
	}
	if !promoted {
		if st.ReadySince == nil {
			st.ReadySince = &metav1.Time{Time: now}
		}
		if wait := pol.SettleTime() - now.Sub(st.ReadySince.Time); wait > 0 {
			st.Message = fmt.Sprintf("wave %d of %d: every CR Ready on chart %s; settling for %s more", st.Wave, len(c.waves()),
				records.DisplayDigest(ro.Spec.To), wait.Round(time.Second))
			return min(wait, coordinatorPoll)
		}
	} else {
		st.Promoted = promote
		r.event(ro, corev1.EventTypeNormal, "Promoted", "Rollout", "wave %d promoted by %s=%q: its gates are skipped", st.Wave,
			rolloutv1.AnnotationPromote, promote)
	}
	r.event(ro, corev1.EventTypeNormal, "WaveComplete", "Rollout", "wave %d of %d: %d CRs Ready on chart %s", st.Wave, len(c.waves()), ready,
		records.DisplayDigest(ro.Spec.To))
	if int(st.Wave) >= len(c.waves()) {
		st.Phase, st.ReadySince = rolloutv1.PhaseComplete, nil
		st.Message = fmt.Sprintf("every CR that is not held runs chart %s", records.DisplayDigest(ro.Spec.To))
		rollouts.WithLabelValues(r.gvkLabel(), rolloutv1.PhaseComplete).Inc()
		r.event(ro, corev1.EventTypeNormal, rolloutv1.PhaseComplete, "Rollout", "%s (%d held)", st.Message, st.Held)
		for _, m := range members {
			if !m.held && m.digest != ro.Spec.To {
				c.move(m.key)
			}
		}
		return 0
	}
	c.startWave(ro, members, st.Wave+1)
	return coordinatorPoll
}

// tally counts the members the current wave admitted and those of them Ready, and names
// those that failed (their pass failed, or they were not Ready within rollout.healthTimeout);
// an admitted member not moved yet is moved.
func (c *waveSteps) tally(ro *rolloutv1.Rollout, members []member, now time.Time) (admitted, ready int, failed []string) {
	pol := c.r.opts.Watch.Rollout
	for _, m := range members {
		if m.held || !machine.Admits(pol, ro, m.key.Namespace, m.key.Name, m.labels) {
			continue
		}
		admitted++
		switch {
		case m.ready:
			ready++
		case m.failed != "":
			failed = append(failed, m.key.String()+": "+m.failed)
		case m.digest == ro.Spec.To && now.Sub(c.sawMoved(ro, m.key, now)) > pol.HealthTime():
			failed = append(failed, fmt.Sprintf("%s: not Ready on chart %s within %s (rollout.healthTimeout)", m.key,
				records.DisplayDigest(ro.Spec.To), pol.HealthTime()))
		case m.digest != ro.Spec.To:
			c.move(m.key) // admitted, not moved yet: its pass may have read the Rollout before it was
		}
	}
	return admitted, ready, failed
}

// sawMoved is when the coordinator first saw the CR at key on the chart of ro.
func (c *waveSteps) sawMoved(ro *rolloutv1.Rollout, key types.NamespacedName, now time.Time) time.Time {
	if c.movedAtFor != ro.Name {
		c.movedAt, c.movedAtFor = map[types.NamespacedName]time.Time{}, ro.Name
	}
	t, ok := c.movedAt[key]
	if !ok {
		c.movedAt[key] = now
		return now
	}
	return t
}

// startWave starts wave k (from 1): it moves status.through as far as the wave's size says,
// in the order of the CRs' keys (CRs the canary's selector picks and held CRs aside).
func (c *waveSteps) startWave(ro *rolloutv1.Rollout, members []member, k int32) {
	r, st := c.r, &ro.Status
	waves := c.waves()
	wv := waves[k-1]
	selected := 0
	var rest []member // sorted by key, as members are
	for _, m := range members {
		switch {
		case m.held:
		case waves[0].Selects(m.labels):
			selected++
		default:
			rest = append(rest, m)
		}
	}
	through := st.Through
	switch {
	case int(k) == len(waves):
		through = throughAll
	case wv.Selector != nil:
	default:
		if need := wv.Target(len(rest)+selected) - selected; need > 0 && len(rest) > 0 {
			through = max(through, rest[min(need, len(rest))-1].order)
		}
	}
	st.Wave, st.Through, st.ReadySince = k, through, nil
	st.WaveStarted = &metav1.Time{Time: r.opts.Clock.Now()}
	moving := 0
	for _, m := range members {
		if !m.held && m.digest != ro.Spec.To && machine.Admits(r.opts.Watch.Rollout, ro, m.key.Namespace, m.key.Name, m.labels) {
			moving++
			c.move(m.key)
		}
	}
	st.Message = fmt.Sprintf("wave %d of %d started: %d CRs move to chart %s", k, len(waves), moving, records.DisplayDigest(ro.Spec.To))
	r.event(ro, corev1.EventTypeNormal, "WaveStarted", "Rollout", "wave %d of %d (%s): %d CRs move to chart %s", k, len(waves), wv.String(),
		moving, records.DisplayDigest(ro.Spec.To))
}

// halt stops the rollout: no further CR moves; with onHalt rollback, the moved CRs go back.
// Each CR it had not moved (and that is not held) gets a pass once the Rollout is written, so
// that its Rollout condition says the rollout halted instead of that it waits for a wave.
func (c *waveSteps) halt(ro *rolloutv1.Rollout, members []member, why string) {
	for _, m := range members {
		if m.digest != ro.Spec.To && !m.held {
			c.move(m.key)
		}
	}
	r, st := c.r, &ro.Status
	st.Phase, st.Message, st.ReadySince = rolloutv1.PhaseHalted, why, nil
	what := "the moved CRs stay where they are (onHalt hold)"
	if r.opts.Watch.Rollout.RollsBack() {
		what = "the moved CRs go back to their earlier chart (onHalt rollback)"
	} else {
		rollouts.WithLabelValues(r.gvkLabel(), rolloutv1.PhaseHalted).Inc()
	}
	r.event(ro, corev1.EventTypeWarning, rolloutv1.PhaseHalted, "Rollout", "%s; %s", why, what)
}

// count fills the rollout's counts in.
func (c *waveSteps) count(ro *rolloutv1.Rollout, members []member) {
	st := &ro.Status
	st.Total, st.Moved, st.Ready, st.Held = int32(len(members)), 0, 0, 0
	for _, m := range members {
		switch {
		case m.digest == ro.Spec.To:
			st.Moved++
			if m.ready {
				st.Ready++
			}
		case m.held:
			st.Held++
		}
	}
}

// observe sets rudder_rollout_crs: the kind's CRs by the chart digest their release is on.
func (c *waveSteps) observe(members []member) {
	gvk := c.r.gvkLabel()
	byDigest := map[string]int{}
	for _, m := range members {
		byDigest[m.digest]++
	}
	rolloutCRs.DeletePartialMatch(map[string]string{"gvk": gvk})
	for d, n := range byDigest {
		rolloutCRs.WithLabelValues(gvk, cmp.Or(d, "none")).Set(float64(n))
	}
}

// enqueue queues a pass of the CR at key, once the controller has started.
func (r *Reconciler) enqueue(key types.NamespacedName) {
	if q := r.startedQueue(); q != nil {
		q.Add(reconcile.Request{NamespacedName: key})
	}
}

// startedQueue is r's controller's queue (nil: not started).
func (r *Reconciler) startedQueue() workqueue.TypedRateLimitingInterface[reconcile.Request] {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.queue
}

// member is one CR of the kind as the coordinator sees it.
type member struct {
	key    types.NamespacedName
	order  string // RolloutKey
	labels map[string]string
	held   bool
	// digest is the chart digest its status.release says the release is on ("": none).
	digest string
	ready  bool
	// failed says why the CR failed on the rollout's chart ("": it did not).
	failed string
	// kept: its Rollout condition says a halted rollout (onHalt rollback) leaves it on the
	// rollout's chart, for want of a revision of an earlier one.
	kept bool
}

// coordinatorPoll is how often an active rollout is looked at without an event.
const coordinatorPoll = 2 * time.Second

// maxFailedNamed bounds status.failedCRs.
const maxFailedNamed = 10

// waves are the policy's waves, with a last one that moves the rest when they do not.
func (c *waveSteps) waves() []watches.Wave {
	ws := c.r.opts.Watch.Rollout.Waves
	if last := ws[len(ws)-1]; last.Percent == 100 {
		return ws
	}
	return append(slices.Clone(ws), watches.Wave{Percent: 100})
}
