package controllers

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"helm.sh/helm/v3/pkg/release"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	rstatus "github.com/rudder-operator/rudder/api/status"
	"github.com/rudder-operator/rudder/internal/helm"
)

// carried is the CR's values of the labels its shard selector names (see helm/shard.go).
func (p *pass) carried() map[string]string {
	keys := p.r.opts.Carried
	if len(keys) == 0 {
		return nil
	}
	out := make(map[string]string, len(keys))
	for _, k := range keys {
		if v, ok := p.obj.GetLabels()[k]; ok {
			out[k] = v
		}
	}
	return out
}

// adopt takes over a release whose records carry other labels than the CR now has: the CR was
// moved to this shard (relabelled), or sharding was turned on. The carried labels of its
// records and of the newest revision's objects are rewritten in place, so that this shard's
// caches see them: no uninstall, no new revision. The shard that served the CR before no
// longer sees it, and lets it go.
func (p *pass) adopt(ctx context.Context, rel *release.Release, o *outcome) bool {
	keys, want := p.r.opts.Carried, p.carried()
	if len(keys) == 0 || rel.Labels[helm.LabelOwnerUID] != p.want.OwnerUID || helm.CarriedMatch(keys, want, rel.Labels) {
		return true
	}
	if err := p.r.opts.Helm.Relabel(p.scope, p.relName, keys, want); err != nil {
		o.fail(rstatus.ReasonReconcileError, fmt.Errorf("adopting release %s: %w", p.relName, err))
		return false
	}
	// The objects a record names are relabelled under the same rules as every action: within
	// the confinement, and (through the writer's guard) only those the release made.
	objs, err := p.r.manifestObjects(p.key, rel, false)
	if err == nil {
		err = p.scope.CheckObjects(p.r.opts.Client.RESTMapper(), objs)
	}
	if err == nil {
		var w client.Client
		if w, err = p.r.opts.Helm.Writer(p.scope); err == nil {
			err = helm.RelabelObjects(ctx, w, objs, keys, want)
		}
	}
	if err != nil {
		o.fail(rstatus.ReasonReconcileError, fmt.Errorf("adopting the objects of release %s: %w", p.relName, err))
		return false
	}
	o.note(corev1.EventTypeNormal, rstatus.ReasonAdopted, "Adopt", fmt.Sprintf(
		"release %s (its records and %d objects) adopted by the shard serving %s: no uninstall, no new revision",
		p.relName, len(objs), describeLabels(keys, want)))
	return true
}

// describeLabels renders the carried labels as a selector would ("k=v", "!k").
func describeLabels(keys []string, l map[string]string) string {
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		if v, ok := l[k]; ok {
			parts = append(parts, k+"="+v)
		} else {
			parts = append(parts, "!"+k)
		}
	}
	sort.Strings(parts)
	return strings.Join(parts, ",")
}
