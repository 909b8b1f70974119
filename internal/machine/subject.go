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
	"github.com/rudder-operator/rudder/internal/helm"
)

// subject is the CR a pass is over, the World that serves it, who acts for its release, and
// the CR's status as the pass read it. It is fixed for the pass: every step reads it, none
// changes it.
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
	// takenOn: no pass acted on the CR before this one (see Found.TakenOn).
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
	s.read.Inventory = rstatus.InventoryOf(obj)
	return s
}

// written is the status the pass writes, to begin with the one it read: the reporter alone
// sets it. The inventory is shared with the read one, not copied: nothing changes an
// inventory in place (reportInventory replaces it), and an idle pass keeps it as read.
func (s *subject) written() rstatus.Common {
	read := s.read
	read.Inventory = nil
	st := *read.DeepCopy()
	st.Inventory = s.read.Inventory
	return st
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

// event records an Event on the CR and logs the same line (with the CR and release), so that
// every release action and failure is in both.
func (s *subject) event(n note, release string) {
	s.w.Recorder.Eventf(s.obj, nil, n.typ, n.reason, n.action, "%s", n.message)
	// "release" is added per line, not with WithValues per pass: zap encodes WithValues eagerly,
	// a cost every idle pass would pay for lines it rarely writes.
	s.log.Info(n.message, "release", release, "event", n.typ, "reason", n.reason, "action", n.action)
}
