package helm

import (
	"fmt"
	"slices"
	"strings"

	"helm.sh/helm/v4/pkg/kube"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/cli-runtime/pkg/resource"
)

// What an action waits for. By default an install, upgrade or rollback waits for its hooks
// only, as Helm 3 did without --wait: the objects' readiness is reported afterwards (the Ready
// condition, by kstatus or the watch's health checks). A watch may have its actions wait
// (WaitPolicy.Enable): Helm 4's kstatus waiter (`--wait=watcher`) until every object is ready,
// failing the action at the action timeout. Helm's waiter waits on every object of the
// release, custom resources included, whatever their status says (helm#31768): Kinds scopes
// the wait to the kinds the platform team knows to become ready. Every wait ends with the
// action's context (see kubeClient.GetWaiter), so deleting the CR or stopping rudder ends it at
// once.

// WaitPolicy is a watch's wait field.
type WaitPolicy struct {
	// Enable: an action waits until its objects are ready.
	Enable bool
	// Jobs: the action waits for its Jobs to complete, too (Helm's --wait-for-jobs).
	Jobs bool
	// Kinds, when set, are the only kinds waited for: `Kind` (of any group) or `Kind.group`
	// (of that group; `Kind.` for the core group).
	Kinds []string
}

// CheckWait says what is wrong with a wait policy, naming the field.
func CheckWait(p WaitPolicy) error {
	if !p.Enable && (p.Jobs || len(p.Kinds) > 0) {
		return fmt.Errorf("enable: jobs and kinds scope a wait, which needs enable: true")
	}
	for i, k := range p.Kinds {
		kind, _, _ := strings.Cut(k, ".")
		if kind == "" || strings.ContainsAny(k, "/ ") {
			return fmt.Errorf("kinds[%d]: %q is not Kind or Kind.group", i, k)
		}
	}
	return nil
}

// strategy is the wait strategy of the policy's actions.
func (p WaitPolicy) strategy() kube.WaitStrategy {
	if p.Enable {
		return kube.StatusWatcherStrategy
	}
	return kube.HookOnlyStrategy
}

// waits reports whether objects of gvk are waited for.
func (p WaitPolicy) waits(gvk schema.GroupVersionKind) bool {
	if len(p.Kinds) == 0 {
		return true
	}
	return slices.ContainsFunc(p.Kinds, func(k string) bool {
		kind, group, qualified := strings.Cut(k, ".")
		return kind == gvk.Kind && (!qualified || group == gvk.Group)
	})
}

// scoped is the part of resources the policy waits for.
func (p WaitPolicy) scoped(resources kube.ResourceList) kube.ResourceList {
	if len(p.Kinds) == 0 {
		return resources
	}
	var out kube.ResourceList
	for _, info := range resources {
		if p.waits(gvkOf(info)) {
			out = append(out, info)
		}
	}
	return out
}

func gvkOf(info *resource.Info) schema.GroupVersionKind {
	if info.Mapping != nil {
		return info.Mapping.GroupVersionKind
	}
	return info.Object.GetObjectKind().GroupVersionKind()
}
