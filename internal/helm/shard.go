package helm

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rudder-operator/rudder/internal/records"
)

// Sharding (rudder --watch-label-selector): each rudder replica serves the CRs its selector
// matches, and its caches hold only those CRs' release records and operands. For that, the
// labels the selector names are carried from each CR to its release records and to its
// operands (Request.Carried), so that one selector selects all three. A CR moved to another
// shard (relabelled) is adopted by the shard that now selects it: Relabel rewrites the carried
// labels of its release records and operands in place — no uninstall, no new revision.

// CarriedPatch is the metadata merge patch that gives an object exactly the carried labels
// want among keys: those in want set to their value, the other keys removed.
func CarriedPatch(keys []string, want map[string]string) map[string]any {
	return records.LabelsPatch(keys, want)
}

// CarriedMatch reports whether labels hold exactly the carried labels want among keys.
func CarriedMatch(keys []string, want, labels map[string]string) bool {
	for _, k := range keys {
		v, ok := labels[k]
		w, wok := want[k]
		if ok != wok || v != w {
			return false
		}
	}
	return true
}

// WithCarried returns objs with the carried labels want among keys (copies where they
// differ): drift re-apply of a release's stored manifest must not undo an adoption.
func WithCarried(objs []*unstructured.Unstructured, keys []string, want map[string]string) []*unstructured.Unstructured {
	if len(keys) == 0 {
		return objs
	}
	out := make([]*unstructured.Unstructured, len(objs))
	for i, o := range objs {
		if CarriedMatch(keys, want, o.GetLabels()) {
			out[i] = o
			continue
		}
		c := o.DeepCopy()
		l := maps.Clone(c.GetLabels())
		if l == nil {
			l = map[string]string{}
		}
		for _, k := range keys {
			delete(l, k)
		}
		maps.Copy(l, want)
		c.SetLabels(l)
		out[i] = c
	}
	return out
}

// Relabel gives every revision record of release name exactly the carried labels want among
// keys, acting as the scope's identity (which must be allowed to patch the release's Secrets,
// as Helm's storage is).
func (rs *Records) Relabel(ctx context.Context, s Scope, name string, keys []string, want map[string]string) error {
	c := rs.core
	d, err := c.driver(s)
	if err != nil {
		return err
	}
	list, err := d.Records().List(ctx, metav1.ListOptions{LabelSelector: "owner=helm,name=" + name})
	if err != nil {
		return fmt.Errorf("listing the records of release %s: %w", name, err)
	}
	patch, err := json.Marshal(CarriedPatch(keys, want))
	if err != nil {
		return err
	}
	for i := range list.Items {
		if CarriedMatch(keys, want, list.Items[i].Labels) {
			continue
		}
		if _, err := d.Records().Patch(ctx, list.Items[i].Name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
			return fmt.Errorf("relabelling %s: %w", list.Items[i].Name, err)
		}
	}
	return nil
}

// WriteFacts gives the record of revision version of release name exactly the facts f
// (records.Facts), acting as the scope's identity.
func (rs *Records) WriteFacts(ctx context.Context, s Scope, name string, version int, f records.Facts) error {
	c := rs.core
	d, err := c.driver(s)
	if err != nil {
		return err
	}
	if err := d.WithContext(ctx).WriteFacts(ctx, name, version, f); err != nil {
		return fmt.Errorf("writing the facts of release %s on revision %d: %w", name, version, err)
	}
	return nil
}

// RelabelObjects gives each object exactly the carried labels want among keys, through w.
func RelabelObjects(ctx context.Context, w client.Writer, objs []*unstructured.Unstructured, keys []string, want map[string]string) error {
	patch, err := json.Marshal(CarriedPatch(keys, want))
	if err != nil {
		return err
	}
	for _, o := range objs {
		target := &unstructured.Unstructured{}
		target.SetGroupVersionKind(o.GroupVersionKind())
		target.SetNamespace(o.GetNamespace())
		target.SetName(o.GetName())
		if err := w.Patch(ctx, target, client.RawPatch(types.MergePatchType, patch)); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("relabelling %s: %w", Describe(o), err)
		}
	}
	return nil
}
