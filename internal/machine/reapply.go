package machine

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	rstatus "github.com/rudder-operator/rudder/api/status"
	"github.com/rudder-operator/rudder/internal/helm"
	"github.com/rudder-operator/rudder/internal/plan"
	"github.com/rudder-operator/rudder/internal/watches"
)

// reapply re-applies what the head revision's manifest sets on objects someone changed or
// deleted, without a new revision: the action on drift.
type reapply struct {
	// objects are the revision's objects, whole, and serverSide whether the revision applies
	// server-side (observer.wholeObjects); readErr is why they could not be read.
	objects    []*unstructured.Unstructured
	serverSide bool
	readErr    error
}

func (reapply) name() plan.Action { return plan.Reapply }

func (a reapply) run(ctx context.Context, e *env, obs observed) result {
	fail := func(err error) result {
		// Every pass checks again, not only the first after the change.
		return result{verdict: retry, reason: rstatus.ReasonReconcileError, err: err, recheck: true}
	}
	// The same confinement as every action: a release made before the watch became stricter
	// is not restored where it may no longer act.
	if err := e.scope.CheckObjects(e.mapper, a.objects); err != nil {
		return fail(fmt.Errorf("not restoring revision %d: %w", obs.head.Revision, err))
	}
	w, err := e.helm.Objects.Writer(e.scope)
	if err != nil {
		return result{verdict: retry, reason: rstatus.ReasonReconcileError, err: err}
	}
	if a.readErr != nil {
		return result{verdict: retry, reason: rstatus.ReasonReconcileError, err: a.readErr}
	}
	objs, serverSide := a.objects, a.serverSide
	var marked []note
	if !obs.head.MadeByRudder() && helm.Unmarked(objs, e.scope) {
		if objs, marked, err = markRevision(ctx, e, obs.head.Revision); err != nil {
			return fail(err)
		}
	}
	// The carried labels are the CR's now, not those stored with the revision (an adoption).
	objs = helm.WithCarried(objs, e.carriedKeys, e.carried)
	// Live objects are read from the API server, as the identity that writes them: the operand
	// cache keeps only what a pass reads (see OperandTransform). rudder's
	// own writer is the manager's client, whose reads are cached: read through the uncached
	// reader instead.
	var live client.Reader = w
	if e.scope.ServiceAccount == "" {
		live = e.live
	}
	d := helm.Drift{Warn: e.watch.Policies().DriftMode() == watches.DriftWarn, Ignored: e.watch.Policies().DriftIgnored,
		ServerSide: serverSide, Release: e.release, Namespace: e.scope.Namespace}
	restored, drifted, err := helm.Reapply(ctx, objs, live, w, d)
	res := result{verdict: succeeded, notes: marked, after: &obs}
	if d.Warn && err == nil {
		res.conditions = map[string]*condition{rstatus.TypeDrifted: driftedCondition(obs.head.Revision, drifted)}
		if len(drifted) > 0 {
			msg := res.conditions[rstatus.TypeDrifted].message
			res.notes = append(res.notes, note{corev1.EventTypeWarning, rstatus.ReasonDriftDetected, "DetectDrift", msg})
		}
	}
	if len(restored) > 0 {
		res.call, res.restored = callOK, len(restored)
		res.notes = append(res.notes, note{corev1.EventTypeNormal, rstatus.ReasonDriftCorrected, "CorrectDrift",
			fmt.Sprintf("restored from revision %d without a new revision: %s", obs.head.Revision, strings.Join(restored, ", "))})
	}
	if err != nil {
		f := fail(err)
		f.notes, f.call = res.notes, callFailed
		return f
	}
	return res
}

// driftedCondition is Drifted as a look at revision's objects in warn mode found them.
func driftedCondition(revision int, drifted []helm.Drifted) *condition {
	if len(drifted) == 0 {
		return &condition{metav1.ConditionFalse, rstatus.ReasonNoDrift,
			fmt.Sprintf("revision %d: the objects have every field the manifest sets", revision)}
	}
	parts := make([]string, len(drifted))
	for i, d := range drifted {
		parts[i] = d.String()
	}
	return &condition{metav1.ConditionTrue, rstatus.ReasonDriftDetected,
		fmt.Sprintf("revision %d: %s differ from the manifest; not restored (driftDetection.mode is warn)",
			revision, strings.Join(parts, "; "))}
}

// markRevision marks revision, which rudder did not make and whose manifest lacks rudder's
// marks (a person's helm upgrade), as the CR's, with the objects of it that exist
// (helm.MarkRevision), and returns its objects as marked and the Event that says so.
func markRevision(ctx context.Context, e *env, revision int) ([]*unstructured.Unstructured, []note, error) {
	rel, marked, err := e.helm.Owners.MarkRevision(ctx, e.scope, e.release, revision)
	if err != nil {
		return nil, nil, fmt.Errorf("revision %d, which rudder did not make, lacks rudder's marks and is not marked: %w",
			revision, err)
	}
	objs, err := helm.ParseManifest(rel.Manifest, rel.Namespace, e.mapper)
	msg := fmt.Sprintf("revision %d, made without rudder (helm upgrade), marked as this CR's in place", revision)
	if len(marked) > 0 {
		msg += ": " + strings.Join(marked, ", ")
	}
	return objs, []note{{corev1.EventTypeNormal, rstatus.ReasonAdopted, "Mark", msg}}, err
}
