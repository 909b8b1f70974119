package machine

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	rolloutv1 "github.com/rudder-operator/rudder/api/rollout/v1alpha1"
	rstatus "github.com/rudder-operator/rudder/api/status"
	"github.com/rudder-operator/rudder/internal/records"
	"github.com/rudder-operator/rudder/internal/release"
	"github.com/rudder-operator/rudder/internal/watches"
)

// Rollouts (a watch's rollout policy): a chart edit reaches the CRs in health-gated waves.
// Each edit gets a Rollout object (rudder.dev/v1alpha1, cluster-scoped, named after the watch
// and the new digest), which the coordinator (controllers/rolloutcoord.go) moves from wave to wave; a pass
// reads it from the cache to know whether its CR moves yet:
//
//   - a CR whose release is on the watch's chart, or that has no release yet (a new CR: it
//     gets the chart on disk), is not held back by a rollout;
//   - any other CR moves once its rollout admits it: a Complete one admits all, a
//     Progressing or Paused one the CRs its canary selector picks and those whose ordering
//     key (RolloutKey) is not past its status.through;
//   - until then, and always while its rudder.dev/rollout-hold annotation says "true", the
//     CR stays on the chart of its own release: a spec change is upgraded with the chart
//     Helm keeps in the release record, not with the new one;
//   - when a rollout halts with onHalt rollback, a CR on the new chart is rolled back to its
//     newest revision of another chart, once.
//
// Which CRs a wave admits is a function of the Rollout's status and of each CR's namespace
// and name, so it survives a restart of rudder; whether a CR moved is its release's chart
// digest, in Helm's storage. The Rollout condition of each CR says where it stands.

// RolloutKey orders the CRs of a rollout: the first 16 hex digits of the SHA-256 of
// "namespace/name". It is stable, and it spreads the waves over namespaces.
func RolloutKey(namespace, name string) string {
	sum := sha256.Sum256([]byte(namespace + "/" + name))
	return hex.EncodeToString(sum[:8])
}

// Admits reports whether the rollout ro of a watch with policy moves the CR (namespace/name,
// with labels l) now.
func Admits(policy *watches.Rollout, ro *rolloutv1.Rollout, namespace, name string, l map[string]string) bool {
	switch ro.Status.Phase {
	case rolloutv1.PhaseComplete:
		return true
	case rolloutv1.PhaseProgressing, rolloutv1.PhasePaused:
	default:
		return false
	}
	if ro.Status.Wave < 1 {
		return false
	}
	if policy.Waves[0].Selects(l) {
		return true
	}
	return ro.Status.Through != "" && RolloutKey(namespace, name) <= ro.Status.Through
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

// rolloutPin decides, for a watch with a rollout policy, whether the pass over sub keeps the
// CR on the chart of its own release, relName (see the top of this file). want is the desired
// state with the watch's chart.
func rolloutPin(ctx context.Context, sub *subject, relName string, want records.Desired) (pin, error) {
	if sub.w.Watch.Rollout == nil {
		return pin{}, nil
	}
	to := want.ChartDigest
	h, err := releaseHead(ctx, sub, relName)
	if err != nil {
		return pin{}, err
	}
	if h == nil || h.OwnerUID != want.OwnerUID || h.ChartDigest == "" {
		return pin{cond: &condition{metav1.ConditionTrue, rstatus.ReasonRolloutCurrent,
			"the release has no earlier chart to keep: it gets the watch's chart"}}, nil
	}
	current := pin{cond: &condition{metav1.ConditionTrue, rstatus.ReasonRolloutCurrent,
		"the release is on the watch's chart " + records.DisplayDigest(to)}}
	if h.ChartDigest == to && !sub.w.Watch.Rollout.RollsBack() {
		return current, nil // only a halt with onHalt rollback moves such a CR
	}
	ro, err := sub.w.Rollouts.Rollout(ctx, sub.w.rolloutName(to))
	switch {
	case meta.IsNoMatchError(err) && h.ChartDigest == to:
		return current, nil
	case meta.IsNoMatchError(err):
		// Rollouts start once the kind is served (the wiring sets the coordinator up then);
		// meanwhile a chart edit waits as for a rollout that has not started.
		return pin{digest: h.ChartDigest, cond: &condition{metav1.ConditionFalse, rstatus.ReasonRolloutWaiting,
			fmt.Sprintf("the API server does not serve rudder's Rollout kind (%s: apply config/crd): the release stays on chart %s until it does, "+
				"then rolls out to %s",
				rolloutv1.GroupVersion.WithKind("Rollout"), records.DisplayDigest(h.ChartDigest), records.DisplayDigest(to))}}, nil
	case err != nil:
		return pin{}, err
	}
	if h.ChartDigest == to {
		if ro != nil && (ro.Status.Phase == rolloutv1.PhaseHalted || ro.Status.Phase == rolloutv1.PhaseRolledBack) {
			back, err := revisionBefore(ctx, sub, relName, h, to)
			if err != nil {
				return pin{}, err
			}
			if back == 0 {
				return pin{cond: &condition{metav1.ConditionTrue, rstatus.ReasonRolloutKept,
					fmt.Sprintf("rollout %s halted (onHalt rollback), but the release has no revision of an earlier chart: it stays on %s", ro.Name,
						records.DisplayDigest(to))}}, nil
			}
			return pin{back: back, cond: &condition{metav1.ConditionFalse, rstatus.ReasonRolloutHalted,
				fmt.Sprintf("rollout %s halted (onHalt rollback): the release goes back to revision %d, of an earlier chart", ro.Name, back)}}, nil
		}
		return current, nil
	}
	held := sub.obj.GetAnnotations()[AnnotationRolloutHold] == "true"
	if !held && ro != nil && Admits(sub.w.Watch.Rollout, ro, sub.key.Namespace, sub.key.Name, sub.obj.GetLabels()) {
		return pin{cond: &condition{metav1.ConditionTrue, rstatus.ReasonRolloutCurrent,
			fmt.Sprintf("rollout %s (wave %d) moves the release to chart %s", ro.Name, ro.Status.Wave, records.DisplayDigest(to))}}, nil
	}
	c := keptOn(ro, held, records.DisplayDigest(h.ChartDigest), records.DisplayDigest(to))
	return pin{digest: h.ChartDigest, cond: &c}, nil
}

// keptOn is the condition of a release kept on chart keep while the watch's is to: held by
// the CR's annotation, waiting for rollout ro (nil: none started), or halted with it.
func keptOn(ro *rolloutv1.Rollout, held bool, keep, to string) condition {
	switch {
	case held:
		return condition{metav1.ConditionFalse, rstatus.ReasonRolloutHeld,
			fmt.Sprintf("%s=true keeps the release on chart %s; the watch's chart is %s", AnnotationRolloutHold, keep, to)}
	case ro == nil:
		return condition{metav1.ConditionFalse, rstatus.ReasonRolloutWaiting,
			fmt.Sprintf("the release stays on chart %s until the rollout to %s starts", keep, to)}
	case ro.Status.Phase == rolloutv1.PhaseHalted || ro.Status.Phase == rolloutv1.PhaseRolledBack:
		return condition{metav1.ConditionFalse, rstatus.ReasonRolloutHalted,
			fmt.Sprintf("rollout %s is %s: the release stays on chart %s", ro.Name, ro.Status.Phase, keep)}
	default:
		return condition{metav1.ConditionFalse, rstatus.ReasonRolloutWaiting,
			fmt.Sprintf("rollout %s (%s, wave %d) has not reached this CR: the release stays on chart %s", ro.Name, ro.Status.Phase,
				ro.Status.Wave, keep)}
	}
}

// releaseHead is the newest revision of sub's release relName (nil: none). When the cache
// shows none, the CR is new, or its release is one the cache (and maybe the CR's status) does
// not show yet, right after its install: its first revision's record says which, with one GET
// (a release whose first revision maxHistory pruned is long in the cache); only then is the
// newest read.
func releaseHead(ctx context.Context, sub *subject, relName string) (*records.Head, error) {
	h, err := sub.w.Helm.History.Head(ctx, sub.scope, relName)
	if err != nil || h != nil {
		return h, err
	}
	first, err := sub.w.Helm.History.Revision(ctx, sub.scope, relName, 1)
	if err != nil || first == nil {
		return nil, err
	}
	rel, err := sub.w.Helm.History.Last(ctx, sub.scope, relName)
	if err != nil {
		return nil, err
	}
	return records.HeadOf(rel), nil
}

// revisionBefore is the newest revision of the release, older than the head, whose chart is
// not digest and that was deployed (0: none in the history).
func revisionBefore(ctx context.Context, sub *subject, relName string, head *records.Head, digest string) (int, error) {
	for v := head.Revision - 1; v > 0; v-- {
		rel, err := sub.w.Helm.History.Revision(ctx, sub.scope, relName, v)
		if err != nil {
			return 0, err
		}
		if rel == nil {
			return 0, nil // past the history Helm keeps
		}
		h := records.HeadOf(rel)
		if h.ChartDigest != digest && h.ChartDigest != "" && (h.Status == release.StatusSuperseded || h.Status == release.StatusDeployed) {
			return v, nil
		}
	}
	return 0, nil
}
