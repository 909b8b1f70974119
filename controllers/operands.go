package controllers

import (
	"errors"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"

	"github.com/rudder-operator/rudder/internal/hook"
	"github.com/rudder-operator/rudder/internal/watches"
)

// The operand cache keeps, of each object rudder rendered, what a pass reads:
//   - its metadata, for change detection (generation, labels, annotations) and for mapping
//     its events to the CR (the owner annotation); not managedFields or ownerReferences;
//   - kstatus's verdict, computed once per watch event from the whole object, under
//     kstatusKey and kstatusMessageKey: a pass reads the verdict instead of computing it;
//   - its status only when a post-release hook of a watched kind reads operands (the built-in
//     Application mirrors its Deployment's and Service's).
//
// Specs, pod templates and payloads are dropped. Drift re-apply reads the live object from the
// API server.
const (
	kstatusKey        = "rudder.dev/kstatus"
	kstatusMessageKey = "rudder.dev/kstatus-message"
)

// operandTransform is the operand cache's transform (see above).
func operandTransform(keepStatus bool) toolscache.TransformFunc {
	return func(in any) (any, error) {
		u, ok := in.(*unstructured.Unstructured)
		if !ok {
			return stripManagedFields(in)
		}
		if _, done := u.Object[kstatusKey]; !done {
			// A verdict kstatus cannot reach (a malformed status) is kept as an empty status
			// with the error as its message, and fails the pass that reads it.
			verdict, msg := "", ""
			if res, err := status.Compute(u); err != nil {
				msg = err.Error()
			} else {
				verdict, msg = string(res.Status), res.Message
			}
			u.Object[kstatusKey], u.Object[kstatusMessageKey] = verdict, msg
		}
		for k := range u.Object {
			switch k {
			case "apiVersion", "kind", "metadata", kstatusKey, kstatusMessageKey:
			case "status":
				if !keepStatus {
					delete(u.Object, k)
				}
			default:
				delete(u.Object, k)
			}
		}
		if md, ok := u.Object["metadata"].(map[string]any); ok {
			delete(md, "managedFields")
			delete(md, "ownerReferences")
		}
		return u, nil
	}
}

// operandStatus is kstatus's verdict on a live object: the one the operand cache computed
// when the object last changed, or computed now for an object read from the API server.
func operandStatus(u *unstructured.Unstructured) (status.Status, string, error) {
	if verdict, ok := u.Object[kstatusKey].(string); ok {
		msg, _ := u.Object[kstatusMessageKey].(string)
		if verdict == "" {
			return "", "", errors.New(msg)
		}
		return status.Status(verdict), msg, nil
	}
	res, err := status.Compute(u)
	if err != nil {
		return "", "", err
	}
	return res.Status, res.Message, nil
}

// hooksReadOperands reports whether a post-release hook of a kind that watches its operands
// may read them (and so their status must be cached).
func hooksReadOperands(ws []*watches.Watch, hooks *hook.Registry) bool {
	for _, w := range ws {
		if w.WatchesDependents() && len(hooks.PostReleaseHooks(w.GroupVersionKind())) > 0 {
			return true
		}
	}
	return false
}
