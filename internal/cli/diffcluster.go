package cli

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	rolloutv1 "github.com/rudder-operator/rudder/api/rollout/v1alpha1"
	"github.com/rudder-operator/rudder/internal/chartsource"
	"github.com/rudder-operator/rudder/internal/helm"
	"github.com/rudder-operator/rudder/internal/records"
	"github.com/rudder-operator/rudder/internal/release"
	"github.com/rudder-operator/rudder/internal/watches"
)

// diffCluster diffs every CR of each of after's watched kinds in the cluster of kubeconfig
// (in namespace, or all), as after renders it, with its release's newest revision as stored.
// A CR without a release yet shows everything its install would make. What the stored
// revision was rendered with that an offline render lacks shows as a change too: lookups
// (which find nothing offline) and valuesFrom sources (read from --values-from).
//
// With record, the summary of each kind whose watch has a rollout policy is recorded on the
// Rollout of the edit (the rudder.dev/preview annotation), which a policy that starts paused
// waits for; shard is the selector of the rudder shard that runs it ("": unsharded).
func diffCluster(ctx context.Context, w io.Writer, after *renderer, kubeconfig, namespace string, record bool, shard string) (bool, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = kubeconfig
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{}).ClientConfig()
	if err != nil {
		return false, fmt.Errorf("--kubeconfig: %w", err)
	}
	scheme := runtime.NewScheme()
	if err := rolloutv1.AddToScheme(scheme); err != nil {
		return false, err
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return false, err
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return false, err
	}
	differ := false
	kinds := slices.SortedFunc(maps.Keys(after.watches), func(a, b schema.GroupVersionKind) int { return cmp.Compare(a.String(), b.String()) })
	for _, gvk := range kinds {
		wt := after.watches[gvk]
		list := &unstructured.UnstructuredList{}
		list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
		err := c.List(ctx, list, client.InNamespace(namespace), client.MatchingLabelsSelector{Selector: wt.LabelSelector()})
		if meta.IsNoMatchError(err) {
			fmt.Fprintf(w, "# %s: the cluster does not serve the kind\n", gvk.GroupKind())
			continue
		}
		if err != nil {
			return false, fmt.Errorf("listing the %s CRs: %w", gvk.GroupKind(), err)
		}
		preview := rolloutv1.Preview{CRs: len(list.Items), At: metav1.Now()}
		for i := range list.Items {
			cr := &list.Items[i]
			live, err := liveRelease(cs, wt.ReleaseNameOf, cr)
			if err != nil {
				return false, err
			}
			cur := after.renderObjects(ctx, cr)
			changed, differs := compare(w, describeCR(cr), live, cur, after.generated(ctx, cr, cur))
			differ = differ || differs
			tally(&preview, cur, differs)
			if err := checkUpdates(ctx, w, c, describeCR(cr), wt.Policies().Forces(), live, cur, changed); err != nil {
				return false, err
			}
		}
		if record && wt.Rollout != nil && namespace == "" {
			if err := recordPreview(ctx, w, c, wt, shard, preview); err != nil {
				return false, err
			}
		}
	}
	return differ, nil
}

// tally counts one CR's diff in the preview.
func tally(p *rolloutv1.Preview, cur rendered, differs bool) {
	switch {
	case cur.err != nil && differs:
		p.Failing++
	case differs:
		p.Changed++
	default:
		p.Unchanged++
	}
}

// recordPreview puts the preview on the Rollout of the watch's chart as it is on disk.
func recordPreview(ctx context.Context, w io.Writer, c client.Client, wt *watches.Watch, shard string, p rolloutv1.Preview) error {
	d, err := chartsource.Digest(wt.ChartPath())
	if err != nil {
		return fmt.Errorf("the digest of %s: %w", wt.ChartPath(), err)
	}
	name := rolloutv1.Name(wt.GroupVersionKind(), shard, records.LabelDigest(wt.ChartDigest(d)))
	data, err := json.Marshal(p)
	if err != nil {
		return err
	}
	annotations := map[string]string{rolloutv1.AnnotationPreview: string(data)}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": annotations}})
	if err != nil {
		return err
	}
	ro := &rolloutv1.Rollout{ObjectMeta: metav1.ObjectMeta{Name: name}}
	err = c.Patch(ctx, ro, client.RawPatch(types.MergePatchType, patch))
	switch {
	case apierrors.IsNotFound(err):
		fmt.Fprintf(w, "# %s: no rollout %s (rudder has not seen this chart yet): nothing recorded\n", wt.GroupVersionKind().GroupKind(), name)
		return nil
	case err != nil:
		return fmt.Errorf("recording the preview on rollout %s: %w", name, err)
	}
	fmt.Fprintf(w, "# %s: recorded on rollout %s: %d CRs, %d changed, %d unchanged, %d failing\n", wt.GroupVersionKind().GroupKind(), name,
		p.CRs, p.Changed, p.Unchanged, p.Failing)
	return nil
}

// checkUpdates asks the API server, with a server-side dry run of each object the edit changes
// as the edited render has it, whether it would take the update, and says which it refuses
// because a field that cannot change does: those need upgrade.force (deleted and created), and
// without it the CR's upgrade fails and is rolled back. Hooks are made anew by each action and
// are not asked about.
func checkUpdates(ctx context.Context, w io.Writer, c client.Client, what string, forces bool, live, cur rendered, changed []string) error {
	before, after := live.objects, cur.objects
	for _, key := range changed {
		if before[key] == nil || after[key] == nil || strings.HasPrefix(key, "hook:") {
			continue // created or deleted: no update to refuse
		}
		data, err := json.Marshal(after[key])
		if err != nil {
			return err
		}
		obj := &unstructured.Unstructured{Object: after[key]}
		err = c.Patch(ctx, obj.DeepCopy(), client.RawPatch(types.ApplyPatchType, data), client.DryRunAll, client.ForceOwnership,
			client.FieldOwner(diffFieldOwner))
		switch {
		case err == nil:
		case helm.ImmutableField(err) && forces:
			fmt.Fprintf(w, "# %s: %s changes a field that cannot change: upgrade.force replaces it (deletes and creates it)\n", what, key)
		case helm.ImmutableField(err):
			fmt.Fprintf(w, "! %s: %s changes a field that cannot change: its upgrade fails and is rolled back unless the watch sets upgrade.force: "+
				"%v\n", what, key, err)
		case apierrors.IsForbidden(err):
			fmt.Fprintf(w, "# %s: %s: not checked with a dry run: %v\n", what, key, err)
		default:
			fmt.Fprintf(w, "! %s: %s: the API server would refuse the update: %v\n", what, key, err)
		}
	}
	return nil
}

// diffFieldOwner is the field manager of diff's dry runs (nothing is written).
const diffFieldOwner = "rudder-diff"

// liveRelease is the newest revision of cr's release as Helm stored it, with its objects, or an
// empty release when it has none yet, or when its newest is a failed install kept as its
// record (records.Head.Kept: its objects were removed): its install makes everything.
func liveRelease(cs kubernetes.Interface, releaseName func(*unstructured.Unstructured) (string, error),
	cr *unstructured.Unstructured) (rendered, error) {
	name, err := releaseName(cr)
	if err != nil {
		return rendered{}, fmt.Errorf("%s: %w", describeCR(cr), err)
	}
	rel, err := helm.ReadLast(cs.CoreV1().Secrets(cr.GetNamespace()), name)
	if err != nil {
		return rendered{}, fmt.Errorf("%s: reading release %s: %w", describeCR(cr), name, err)
	}
	if rel == nil || records.HeadOf(rel).Kept() {
		rel = &release.Release{Name: name, Namespace: cr.GetNamespace()}
	}
	return renderedOf(rel, nil), nil
}
