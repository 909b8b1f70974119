package helm

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"sort"
	"strings"

	release "helm.sh/helm/v4/pkg/release/v1"
	"helm.sh/helm/v4/pkg/storage"
	"helm.sh/helm/v4/pkg/storage/driver"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/rudder-operator/rudder/internal/records"
)

// Letting a release go: a CR deleted with rudder.dev/on-delete: keep leaves its release and
// objects to whoever manages them next (plain Helm, another operator), with nothing of rudder
// or of the CR left on them. rudder's marks (label rudder.dev/managed, annotation
// rudder.dev/owner) and the owner reference to the CR come off the live objects — without the
// latter Kubernetes' garbage collector would delete them with the CR — and off every record's
// manifest and hooks, so that a `helm rollback` to a revision rudder made does not put the
// reference back; the records lose rudder's labels (their facts), and read as any Helm
// release's. The revisions, their numbers and the objects' UIDs are kept.

// LetGo lets release name of the scope's owner go, as above, acting as the scope's identity
// through its guard: the objects are written only while they are still marked as the
// release's. It returns how many live objects it changed. A LetGo that died part way is done
// again: what is already let go is left as it is.
func (o *Owners) LetGo(ctx context.Context, s Scope, name string) (int, error) {
	c := o.core
	st, revisions, err := c.history(ctx, s, name)
	if err != nil || len(revisions) == 0 {
		return 0, err
	}
	w, err := c.writer(s)
	if err != nil {
		return 0, err
	}
	changed := 0
	newest := revisions[len(revisions)-1]
	for _, text := range append([]string{newest.Manifest}, hookManifests(newest)...) {
		objs, err := ParseIdentities(text, s.Namespace, c.mapper)
		if err != nil {
			return changed, fmt.Errorf("reading the objects of release %s: %w", name, err)
		}
		for _, id := range objs {
			n, err := letGoObject(ctx, w, id, s.Owner.UID)
			if err != nil {
				return changed, err
			}
			changed += n
		}
	}
	for _, rel := range revisions {
		for k := range rel.Labels {
			if strings.HasPrefix(k, records.LabelPrefix) {
				delete(rel.Labels, k)
			}
		}
		if err := rewriteRecord(st, rel, func(obj map[string]any) bool { return unmark(obj, s.Owner.UID) }); err != nil {
			return changed, err
		}
	}
	return changed, nil
}

// history is every revision of release name, oldest first (none: empty), read from storage,
// with the storage to write them back to.
func (c *core) history(ctx context.Context, s Scope, name string) (*storage.Storage, []*release.Release, error) {
	st, err := c.storageOf(ctx, s)
	if err != nil {
		return nil, nil, err
	}
	revisions, err := records.V1sOf(st.History(name))
	if err != nil && !errors.Is(err, driver.ErrReleaseNotFound) {
		return nil, nil, fmt.Errorf("reading the records of release %s: %w", name, err)
	}
	sort.Slice(revisions, func(i, j int) bool { return revisions[i].Version < revisions[j].Version })
	return st, revisions, nil
}

// rewriteRecord stores rel again with change applied to each object of its manifest and hooks
// (rewriteManifest).
func rewriteRecord(st *storage.Storage, rel *release.Release, change func(obj map[string]any) bool) error {
	var err error
	if rel.Manifest, err = rewriteManifest(rel.Manifest, change); err != nil {
		return fmt.Errorf("revision %d of release %s: %w", rel.Version, rel.Name, err)
	}
	for _, h := range rel.Hooks {
		if h.Manifest, err = rewriteManifest(h.Manifest, change); err != nil {
			return fmt.Errorf("revision %d of release %s: %w", rel.Version, rel.Name, err)
		}
	}
	if err := st.Update(rel); err != nil {
		return fmt.Errorf("revision %d of release %s: %w", rel.Version, rel.Name, err)
	}
	return nil
}

func hookManifests(rel *release.Release) []string {
	out := make([]string, 0, len(rel.Hooks))
	for _, h := range rel.Hooks {
		out = append(out, h.Manifest)
	}
	return out
}

// letGoObject takes rudder's marks and the owner reference to uid off the live object id,
// with its resourceVersion as a precondition; 1 when it changed it.
func letGoObject(ctx context.Context, w client.Client, id *unstructured.Unstructured, uid types.UID) (int, error) {
	live := &unstructured.Unstructured{}
	live.SetGroupVersionKind(id.GroupVersionKind())
	if err := w.Get(ctx, client.ObjectKeyFromObject(id), live); err != nil {
		if apierrors.IsNotFound(err) {
			return 0, nil
		}
		return 0, fmt.Errorf("reading %s: %w", Describe(id), err)
	}
	if !unmark(live.Object, uid) {
		return 0, nil
	}
	if err := w.Update(ctx, live); err != nil {
		return 0, fmt.Errorf("letting %s go: %w", Describe(id), err)
	}
	return 1, nil
}

// unmark takes rudder's marks and the owner reference to uid off obj; it reports whether
// there were any.
func unmark(obj map[string]any, uid types.UID) bool {
	u := unstructured.Unstructured{Object: obj}
	changed := false
	if l := u.GetLabels(); l[records.LabelManaged] != "" {
		delete(l, records.LabelManaged)
		u.SetLabels(l)
		changed = true
	}
	if a := u.GetAnnotations(); a[records.AnnotationOwner] != "" {
		delete(a, records.AnnotationOwner)
		u.SetAnnotations(a)
		changed = true
	}
	refs := u.GetOwnerReferences()
	kept := refs[:0:0]
	for _, r := range refs {
		if r.UID != uid {
			kept = append(kept, r)
		}
	}
	if len(kept) != len(refs) {
		u.SetOwnerReferences(kept)
		changed = true
	}
	return changed
}

var documentStart = regexp.MustCompile(`(?m)^---[ \t]*$\n?`)

// rewriteManifest is manifest with change applied to each object; a document's leading
// comments (Helm's "# Source:"), and every document change leaves as it is (it reports
// false), stay as they are, and emptied metadata maps and lists go.
func rewriteManifest(manifest string, change func(obj map[string]any) bool) (string, error) {
	docs := documentStart.Split(manifest, -1)
	for i, doc := range docs {
		body := doc
		var head strings.Builder
		for strings.HasPrefix(body, "#") {
			line, rest, _ := strings.Cut(body, "\n")
			head.WriteString(line + "\n")
			body = rest
		}
		var obj map[string]any
		if err := yaml.Unmarshal([]byte(body), &obj); err != nil {
			return "", fmt.Errorf("a document of the manifest: %w", err)
		}
		if obj == nil || !change(obj) {
			continue
		}
		if meta, ok := obj["metadata"].(map[string]any); ok {
			for _, k := range []string{"labels", "annotations", "ownerReferences"} {
				if m, ok := meta[k].(map[string]any); ok && len(m) == 0 {
					delete(meta, k)
				}
				if l, ok := meta[k].([]any); ok && len(l) == 0 {
					delete(meta, k)
				}
			}
		}
		out, err := yaml.Marshal(obj)
		if err != nil {
			return "", err
		}
		docs[i] = head.String() + string(out)
	}
	return strings.Join(docs, "---\n"), nil
}
