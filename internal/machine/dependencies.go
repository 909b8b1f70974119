package machine

import (
	"context"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	rstatus "github.com/rudder-operator/rudder/api/status"
	"github.com/rudder-operator/rudder/internal/watches"
)

// maxDependencyWalk bounds the CRs a pass reads to find a cycle through its dependencies.
const maxDependencyWalk = 256

// dependencies reads the CRs the CR depends on (watches.DependsOn): why it waits for them
// ("": it does not), or the outcome of a pass that ends here: an entry that is malformed or
// not allowed, or a cycle, is Stalled until the CR or a CR of the cycle changes. A missing
// dependency is waited for, as one that is not ready.
func (ob *observer) dependencies(ctx context.Context) (string, *outcome) {
	sub, w := ob.sub, ob.sub.w
	if !w.Watch.Ordering().Has(sub.obj) {
		return "", nil
	}
	deps, err := w.Watch.Ordering().Of(sub.obj)
	if err != nil {
		return "", stalled(rstatus.ReasonDependencyInvalid, err.Error()+"; nothing is released until it is mended")
	}
	if len(deps) == 0 || w.Dependencies == nil {
		return "", nil
	}
	objs := make([]*unstructured.Unstructured, len(deps)) // nil: not found
	for i, d := range deps {
		if objs[i], err = w.Dependencies.Get(ctx, d); err != nil {
			return "", retried(rstatus.ReasonReconcileError, fmt.Errorf("reading the dependency %s: %w", d, err))
		}
	}
	if cycle, err := ob.cycle(ctx, deps, objs); err != nil {
		return "", retried(rstatus.ReasonReconcileError, err)
	} else if cycle != "" {
		return "", stalled(rstatus.ReasonDependencyCycle, "the dependencies lead back to this CR: "+cycle+
			"; nothing is released until one of them stops depending on the next")
	}
	var waits []string
	for i, d := range deps {
		dep := objs[i]
		if dep == nil {
			waits = append(waits, d.String()+": not found")
			continue
		}
		if ok, why := w.Watch.Ordering().Ready(dep); !ok {
			waits = append(waits, d.String()+": "+why)
		} else if why := w.Dependencies.Behind(dep); why != "" {
			waits = append(waits, d.String()+": "+why)
		}
	}
	return strings.Join(waits, "; "), nil
}

// cycle is the path by which deps, the CR's dependencies (objs: as the pass read them, nil
// when missing), lead back to the CR ("": none), read from the CRs' own annotations and
// watches, at most maxDependencyWalk of them. A CR of a namespace the CR's watch does not let
// it depend on is named only as such.
func (ob *observer) cycle(ctx context.Context, deps []watches.Dependency, objs []*unstructured.Unstructured) (string, error) {
	sub, w := ob.sub, ob.sub.w
	self := watches.DependencyOn(sub.obj.GroupVersionKind(), sub.obj)
	seen := map[watches.Dependency]bool{}
	var path []watches.Dependency
	var walk func(d watches.Dependency, obj *unstructured.Unstructured) (bool, error)
	walk = func(d watches.Dependency, obj *unstructured.Unstructured) (bool, error) {
		if seen[d] || len(seen) >= maxDependencyWalk || obj == nil {
			return false, nil
		}
		seen[d] = true
		next, err := w.Dependencies.Of(obj)
		if err != nil {
			return false, nil // obj's own pass reports its entries
		}
		path = append(path, d)
		for _, n := range next {
			if n == self {
				return true, nil
			}
			if seen[n] {
				continue
			}
			nobj, err := w.Dependencies.Get(ctx, n)
			if err != nil {
				return false, err
			}
			if found, err := walk(n, nobj); found || err != nil {
				return found, err
			}
		}
		path = path[:len(path)-1]
		return false, nil
	}
	for i, d := range deps {
		found, err := walk(d, objs[i])
		if err != nil {
			return "", err
		}
		if found {
			names := []string{self.String()}
			for _, p := range path {
				if p.Namespace != self.Namespace && !w.Watch.Ordering().MayDependIn(p.Namespace) {
					names = append(names, "a CR of another namespace")
					continue
				}
				names = append(names, p.String())
			}
			return strings.Join(append(names, self.String()), " → "), nil
		}
	}
	return "", nil
}
