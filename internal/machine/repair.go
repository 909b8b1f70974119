package machine

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	rstatus "github.com/rudder-operator/rudder/api/status"
	"github.com/rudder-operator/rudder/internal/helm"
	"github.com/rudder-operator/rudder/internal/plan"
	"github.com/rudder-operator/rudder/internal/records"
	"github.com/rudder-operator/rudder/internal/release"
)

// The actions that repair a release's records: no new revision.

// unlock marks a pending revision that a dead operation left as failed, or deployed when it was
// an upgrade that completed but for its last write (records.StateLocked, records.Unlock).
type unlock struct{}

func (unlock) name() plan.Action { return plan.Unlock }

func (unlock) run(ctx context.Context, e *env, obs observed) result {
	prev := obs.rel.Status
	rel, unlocked, err := e.helm.Records.Unlock(ctx, e.scope, obs.rel)
	if err != nil {
		return result{verdict: retry, reason: rstatus.ReasonReconcileError, err: fmt.Errorf("unlocking release %s: %w", e.release, err),
			call: callFailed}
	}
	h := records.HeadOf(rel)
	res := result{verdict: succeeded, after: &observed{head: h, rel: rel}, call: callOK}
	if !unlocked {
		// Storage had completed the revision: the view that found it pending was behind, and
		// the pass goes on from storage's.
		return res
	}
	if rel.Status == release.StatusDeployed {
		// The upgrade had completed but for its last write (records.Unlock): the pass goes on
		// from the deployed revision, as after the upgrade itself.
		res.notes = []note{{corev1.EventTypeNormal, rstatus.ReasonUnlocked, "Unlock", fmt.Sprintf(
			"revision %d was left %s, although its upgrade had completed (the revision it replaced was marked superseded; the last write was "+
				"lost); marked deployed",
			rel.Version, prev)}}
		return res
	}
	msg := fmt.Sprintf("revision %d was left %s by an operation that is gone; marked failed", rel.Version, prev)
	res.notes = []note{{corev1.EventTypeWarning, rstatus.ReasonUnlocked, "Unlock", msg}}
	res.released = &condition{metav1.ConditionFalse, rstatus.ReasonUnlocked, msg}
	return res
}

// supersede completes a history the cache shows with older revisions still marked deployed
// next to the deployed newest one (Helm only logs a failed update of the revision an upgrade
// or rollback replaces): it marks them superseded.
type supersede struct{}

func (supersede) name() plan.Action { return plan.Supersede }

func (supersede) run(ctx context.Context, e *env, obs observed) result {
	marked, err := e.helm.Records.Supersede(ctx, e.scope, e.release)
	if err != nil {
		return result{verdict: retry, reason: rstatus.ReasonReconcileError,
			err: fmt.Errorf("marking the older deployed revisions of %s superseded: %w", e.release, err), call: callFailed}
	}
	head := *obs.head
	head.OlderDeployed = nil
	res := result{verdict: succeeded, after: &observed{head: &head, rel: obs.rel}}
	if len(marked) > 0 {
		res.call = callOK
		res.notes = []note{{corev1.EventTypeNormal, rstatus.ReasonSuperseded, "Supersede", fmt.Sprintf(
			"revisions %v were still marked deployed next to revision %d (an update of their records was lost while they were replaced); marked "+
				"superseded",
			marked, obs.head.Revision)}}
	}
	return res
}

// adopt takes over a release whose records carry other labels than the CR now has: the CR was
// moved to this shard (relabelled), or sharding was turned on. The carried labels of its
// records and of the newest revision's objects are rewritten in place, so that this shard's
// caches see them: no uninstall, no new revision. The shard that served the CR before no
// longer sees it, and lets it go.
type adopt struct{}

func (adopt) name() plan.Action { return plan.Adopt }

func (adopt) run(ctx context.Context, e *env, obs observed) result {
	keys, want := e.carriedKeys, e.carried
	if err := e.helm.Records.Relabel(ctx, e.scope, e.release, keys, want); err != nil {
		return result{verdict: retry, reason: rstatus.ReasonReconcileError, err: fmt.Errorf("adopting release %s: %w", e.release, err),
			call: callFailed}
	}
	// The objects a record names are relabelled under the same rules as every action: within
	// the confinement, and (through the writer's guard) only those the release made.
	objs, err := e.memory.manifestObjects(e.key, obs.rel, false, e.mapper)
	if err == nil {
		err = e.scope.CheckObjects(e.mapper, objs)
	}
	if err == nil {
		var w client.Client
		if w, err = e.helm.Objects.Writer(e.scope); err == nil {
			err = helm.RelabelObjects(ctx, w, objs, keys, want)
		}
	}
	if err != nil {
		return result{verdict: retry, reason: rstatus.ReasonReconcileError, err: fmt.Errorf("adopting the objects of release %s: %w", e.release,
			err), call: callFailed}
	}
	return result{verdict: succeeded, after: &obs, call: callOK, notes: []note{{corev1.EventTypeNormal, rstatus.ReasonAdopted, "Adopt",
		fmt.Sprintf(
			"release %s (its records and %d objects) adopted by the shard serving %s: no uninstall, no new revision",
			e.release, len(objs), DescribeLabels(keys, want))}}}
}

// adoptRelease takes over a release of the CR's name that another Helm operator (operator-sdk's
// or HOP's helm-operator) or a person made, whose objects proved it is the CR's (proof): each
// object it read gets rudder's marks, on the condition that it is as read, and every record
// rudder's labels. The labels' digests are the CR's where the revision holds the chart and the
// values rudder would make it from, so that it is in sync and nothing follows; else the next
// step is one upgrade. No revision is made, nothing is deleted or recreated.
type adoptRelease struct {
	proof *helm.Proof
	// chart is the fingerprint of the chart the CR is made from (helm.ChartFingerprint); ""
	// when the watch layers something on it, which no other operator's revision holds.
	chart string
}

func (adoptRelease) name() plan.Action { return plan.AdoptRelease }

func (a adoptRelease) run(ctx context.Context, e *env, _ observed) result {
	chartDigest, valuesDigest := "adopted", "adopted"
	if a.chart != "" && a.chart == a.proof.Chart {
		chartDigest = e.want.ChartDigest
	}
	if a.proof.ValuesDigest == e.want.ValuesDigest {
		valuesDigest = e.want.ValuesDigest
	}
	labels := map[string]string{
		records.LabelOwnerUID:     e.want.OwnerUID,
		records.LabelOwnerKind:    records.KindLabel(e.scope.Owner.GVK.GroupKind()),
		records.LabelChartDigest:  chartDigest,
		records.LabelValuesDigest: valuesDigest,
	}
	if err := e.helm.Owners.AdoptForeign(ctx, e.scope, e.release, a.proof, labels); err != nil {
		return result{verdict: retry, reason: rstatus.ReasonReconcileError, err: fmt.Errorf("adopting release %s: %w", e.release, err),
			call: callFailed}
	}
	then := "its chart and values are the CR's: no new revision"
	if chartDigest != e.want.ChartDigest || valuesDigest != e.want.ValuesDigest {
		then = "its chart or values differ from the CR's: one upgrade follows"
	}
	return result{verdict: succeeded, call: callOK, notes: []note{{corev1.EventTypeNormal, rstatus.ReasonAdopted, "Adopt", fmt.Sprintf(
		"release %s adopted from %s: the %d objects of revision %d that exist carry this %s's owner reference (or annotations); %s",
		e.release, a.proof.By, len(a.proof.Objects), a.proof.Revision, e.kind, then)}}}
}
