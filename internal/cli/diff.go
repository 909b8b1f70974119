package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/pmezard/go-difflib/difflib"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"

	"github.com/rudder-operator/rudder/internal/guard"
	"github.com/rudder-operator/rudder/internal/helm"
	"github.com/rudder-operator/rudder/internal/release"
)

// diffFiles diffs the CRs of files, rendered with the watches of from and with after's.
func diffFiles(ctx context.Context, w io.Writer, after *renderer, from string, opts renderOptions, env Env, files []string) (bool, error) {
	before, err := newRenderer(from, opts, env.Hooks)
	if err != nil {
		return false, fmt.Errorf("--from: %w", err)
	}
	differ := false
	for _, file := range files {
		crs, err := readCRs(file)
		if err != nil {
			return false, err
		}
		for _, cr := range crs {
			if cr.GetNamespace() == "" {
				cr.SetNamespace("default")
			}
			old := before.renderObjects(ctx, cr)
			cur := after.renderObjects(ctx, cr)
			if _, changed := compare(w, describeCR(cr), old, cur, before.generated(ctx, cr, old)); changed {
				differ = true
			}
		}
	}
	return differ, nil
}

// rendered is one render of a CR's release and its objects by key (see releaseObjects), or
// why there is none.
type rendered struct {
	rel     *release.Release
	objects map[string]map[string]any
	err     error
}

// renderedOf is rel with its objects, parsed once for every comparison that reads them.
func renderedOf(rel *release.Release, err error) rendered {
	if err != nil {
		return rendered{err: err}
	}
	objs, err := releaseObjects(rel)
	if err != nil {
		return rendered{err: fmt.Errorf("release %s: %w", rel.Name, err)}
	}
	return rendered{rel: rel, objects: objs}
}

// renderObjects renders cr as r does, with its objects.
func (r *renderer) renderObjects(ctx context.Context, cr *unstructured.Unstructured) rendered {
	return renderedOf(r.render(ctx, cr.DeepCopy()))
}

// compare prints what the edit does to one CR, from its release as it is (old) to as the edit
// renders it (cur), with the fields the chart generates masked. It returns the keys of the
// objects that change, and whether anything does (a render that fails on one side only, or
// differently, changes no object but changes the CR's outcome).
func compare(w io.Writer, what string, old, cur rendered, generated map[string][][]string) ([]string, bool) {
	switch {
	case old.err != nil && cur.err != nil:
		if old.err.Error() == cur.err.Error() {
			return nil, false // broken alike before and after: the edit changes nothing for it
		}
		fmt.Fprintf(w, "! %s: fails before and after the edit, differently\n  before: %v\n  after (%s): %v\n", what, old.err,
			failureClass(cur.err), cur.err)
		return nil, true
	case cur.err != nil:
		fmt.Fprintf(w, "! %s: the edit makes it fail (%s): %v\n", what, failureClass(cur.err), cur.err)
		return nil, true
	case old.err != nil:
		fmt.Fprintf(w, "! %s: renders after the edit; before, it failed: %v\n", what, old.err)
		return nil, true
	}
	changes, err := objectDiffs(old.objects, cur.objects, generated)
	if err != nil {
		fmt.Fprintf(w, "! %s: %v\n", what, err)
		return nil, true
	}
	for _, key := range slices.Sorted(maps.Keys(generated)) {
		fields := fmt.Sprintf("%d fields differ", len(generated[key]))
		if len(generated[key]) == 1 {
			fields = "1 field differs"
		}
		fmt.Fprintf(w, "# %s: %s: %s on every render (values the chart generates), shown as %q\n", what, key, fields, generatedValue)
	}
	if len(changes) == 0 {
		return nil, false
	}
	objects := "objects change"
	if len(changes) == 1 {
		objects = "object changes"
	}
	fmt.Fprintf(w, "# %s: release %s in namespace %s: %d %s\n", what, cur.rel.Name, cur.rel.Namespace, len(changes), objects)
	keys := slices.Sorted(maps.Keys(changes))
	for _, key := range keys {
		fmt.Fprint(w, changes[key])
	}
	return keys, true
}

// failureClass names why a render fails, for the people deciding whether to make the edit
// live: the watch's confinement, one of its limits, the values against the chart's schema, the
// watch's post-renderers, or the chart itself.
func failureClass(err error) string {
	var ce *guard.ConfinementError
	var le *helm.LimitError
	switch {
	case errors.As(err, &ce):
		return "breaks the watch's confinement"
	case errors.As(err, &le):
		return "past the watch's limit " + le.Limit
	case helm.IsPostRenderError(err):
		return "the watch's post-renderers fail"
	case errors.Is(err, errValuesSchema):
		return "values do not validate"
	}
	return "does not render"
}

// generated are the fields of first, r's render of cr, that a second render of cr disagrees on
// (none when first failed): a chart may render differently each time (a password it generates
// when none is given), and such a field is no change of the edit's.
func (r *renderer) generated(ctx context.Context, cr *unstructured.Unstructured, first rendered) map[string][][]string {
	if first.err != nil {
		return nil
	}
	again := r.renderObjects(ctx, cr)
	if again.err != nil {
		return nil
	}
	return generatedFields(first.objects, again.objects)
}

// generatedValue stands for a field whose value the chart generates anew on every render.
const generatedValue = "(generated on every render)"

// generatedFields are, by object, the fields two renders of the same chart and values disagree
// on.
func generatedFields(a, b map[string]map[string]any) map[string][][]string {
	out := map[string][][]string{}
	for key, oa := range a {
		if ob, ok := b[key]; ok {
			var paths [][]string
			differingFields(oa, ob, nil, &paths)
			if len(paths) > 0 {
				out[key] = paths
			}
		}
	}
	return out
}

// differingFields adds to out the paths below path at which a and b differ.
func differingFields(a, b any, path []string, out *[][]string) {
	ma, okA := a.(map[string]any)
	mb, okB := b.(map[string]any)
	if okA && okB {
		for _, k := range unionKeys(ma, mb) {
			differingFields(ma[k], mb[k], append(slices.Clone(path), k), out)
		}
		return
	}
	la, okA := a.([]any)
	lb, okB := b.([]any)
	if okA && okB && len(la) == len(lb) {
		for i := range la {
			differingFields(la[i], lb[i], append(slices.Clone(path), strconv.Itoa(i)), out)
		}
		return
	}
	if !equality.Semantic.DeepEqual(a, b) {
		*out = append(*out, path)
	}
}

// masked sets each of paths in obj, where it is, to generatedValue.
func masked(obj map[string]any, paths [][]string) {
	for _, p := range paths {
		var cur any = obj
		for i, k := range p {
			last := i == len(p)-1
			switch c := cur.(type) {
			case map[string]any:
				if _, ok := c[k]; ok && last {
					c[k] = generatedValue
				}
				cur = c[k]
			case []any:
				n, err := strconv.Atoi(k)
				if err != nil || n >= len(c) {
					cur = nil
					continue
				}
				if last {
					c[n] = generatedValue
				}
				cur = c[n]
			default:
				cur = nil
			}
		}
	}
}

// objectDiffs are the unified diffs of the objects of two renders of one release, by key,
// with the fields the chart generates (by object) masked in both.
func objectDiffs(before, after map[string]map[string]any, generated map[string][][]string) (map[string]string, error) {
	out := map[string]string{}
	for _, key := range unionKeys(before, after) {
		a, err := yamlOf(before[key], generated[key])
		if err != nil {
			return nil, err
		}
		b, err := yamlOf(after[key], generated[key])
		if err != nil {
			return nil, err
		}
		if a == b {
			continue
		}
		d, err := difflib.GetUnifiedDiffString(difflib.UnifiedDiff{A: lines(a), B: lines(b),
			FromFile: "before/" + key, ToFile: "after/" + key, Context: 3})
		if err != nil {
			return nil, err
		}
		out[key] = d
	}
	return out, nil
}

// yamlOf is obj as YAML with sorted keys, its generated fields masked ("" for no object).
func yamlOf(obj map[string]any, generated [][]string) (string, error) {
	if obj == nil {
		return "", nil
	}
	obj = runtime.DeepCopyJSON(obj)
	masked(obj, generated)
	y, err := yaml.Marshal(obj)
	return string(y), err
}

// unionKeys are the keys of a and b, sorted.
func unionKeys[V any](a, b map[string]V) []string {
	keys := slices.Collect(maps.Keys(a))
	for k := range b {
		if _, ok := a[k]; !ok {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	return keys
}

// lines are text's lines, each with its newline ("" has none).
func lines(text string) []string {
	if text == "" {
		return nil
	}
	return difflib.SplitLines(strings.TrimSuffix(text, "\n"))
}

// releaseObjects are the objects of a render's manifest and hooks by key: Kind.group, then
// namespace and name (a hook's key says so: an object may be a hook in one render and not in
// the other).
func releaseObjects(rel *release.Release) (map[string]map[string]any, error) {
	out := map[string]map[string]any{}
	collect := func(manifest, prefix string) error {
		objs, err := helm.ParseManifest(manifest, rel.Namespace, helm.StaticMapper())
		if err != nil {
			return err
		}
		for _, o := range objs {
			key := o.GroupVersionKind().GroupKind().String() + "/"
			if ns := o.GetNamespace(); ns != "" {
				key += ns + "/"
			}
			out[prefix+key+o.GetName()] = o.Object
		}
		return nil
	}
	if err := collect(rel.Manifest, ""); err != nil {
		return nil, err
	}
	for _, h := range rel.Hooks {
		if err := collect(h.Manifest, "hook:"); err != nil {
			return nil, err
		}
	}
	return out, nil
}
