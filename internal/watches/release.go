package watches

import (
	"bytes"
	"fmt"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rudder-operator/rudder/internal/guard"
	"github.com/rudder-operator/rudder/internal/helm"
	"github.com/rudder-operator/rudder/internal/records"
)

// What a watch makes of one CR. Every reconcile pass and `rudder template` build a release with
// these methods, in this order, so that the two never disagree: ReleaseNameOf, Values, the
// kind's PreRelease hooks, helm.ValidateValues, records.ValuesDigest, Request.

// ReleaseNameOf renders the watch's releaseName template for a CR (default: the CR name) and
// fits it into Helm's 53 characters.
func (w *Watch) ReleaseNameOf(obj *unstructured.Unstructured) (string, error) {
	var name string
	if w.releaseNameTpl != nil {
		var buf bytes.Buffer
		if err := w.releaseNameTpl.Execute(&buf, obj.Object); err != nil {
			return "", fmt.Errorf("releaseName: %w", err)
		}
		name = strings.TrimSpace(strings.ReplaceAll(buf.String(), "<no value>", ""))
	}
	if name == "" {
		name = obj.GetName()
	}
	return records.ReleaseName(name), nil
}

// Values is a CR's spec, on top of base (what its valuesFrom sources hold, merged by
// MergeSources; nil: none), with the watch's overrideValues on top (parsed like `helm --set`,
// commas in a value kept literally). It returns the override keys it applied, sorted.
func (w *Watch) Values(obj *unstructured.Unstructured, base map[string]any) (map[string]any, []string, error) {
	spec, _, _ := unstructured.NestedMap(obj.Object, "spec") // a deep copy
	if spec == nil {
		spec = map[string]any{}
	}
	if len(base) > 0 {
		spec = helm.MergeValues(spec, base) // the spec wins
	}
	ov, err := w.Overrides(obj.Object)
	if err != nil {
		return nil, nil, err
	}
	keys := make([]string, 0, len(ov))
	for k := range ov {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		v := strings.NewReplacer(`\`, `\\`, `,`, `\,`).Replace(ov[k])
		if err := helm.ParseSet(k+"="+v, spec); err != nil {
			return nil, nil, fmt.Errorf("overrideValues.%s: %w", k, err)
		}
	}
	return spec, keys, nil
}

// Scope is who acts for the release of a CR of the watch — its serviceAccountName, else
// defaultServiceAccount, else rudder itself — where it may act, what it owns, and its limits.
func (w *Watch) Scope(obj client.Object, defaultServiceAccount string) helm.Scope {
	sa := w.ServiceAccountName
	if sa == "" {
		sa = defaultServiceAccount
	}
	return helm.Scope{
		Confinement: guard.Confinement{Namespace: obj.GetNamespace(), AllowedNamespaces: w.AllowedNamespaces,
			AllowClusterScoped: w.AllowClusterScoped, AllowAggregationLabels: w.AllowAggregationLabels,
			AllowReads: w.AllowReads, AllowServiceAccounts: w.AllowServiceAccounts, AllowSubjects: w.AllowSubjects,
			AllowRoles: w.AllowRoles, AllowRules: w.AllowRules, PodSecurity: w.PodSecurity, AllowExternalIPs: w.AllowExternalIPs},
		ServiceAccount: sa,
		Owner:          guard.Owner{GVK: w.GroupVersionKind(), Key: client.ObjectKeyFromObject(obj), UID: obj.GetUID()},
		Limits:         w.Limits.helm(),
		Post:           w.post,
		Apply:          w.Policies().ApplyPolicy(),
		Wait:           w.Policies().WaitPolicy(),
		CheckValues:    w.CheckValues,
	}
}

// Request is the install or upgrade request for a CR. ch must be a private copy of the chart.
func (w *Watch) Request(obj *unstructured.Unstructured, scope helm.Scope, releaseName string,
	ch *helm.Chart, chartDigest string, values map[string]any, valuesDigest, description string) *helm.Request {
	return &helm.Request{
		Scope:        scope,
		ReleaseName:  releaseName,
		Chart:        ch,
		ChartDigest:  chartDigest,
		Values:       values,
		ValuesDigest: valuesDigest,
		MaxHistory:   w.Policies().HistoryLimit(),
		Description:  description,
		CRDs:         w.Policies().CRDPolicy(),
		Force:        w.Policies().Forces(),
	}
}

// CheckValuesOf are the values the chart at path is linted with: the checkValues of every
// watch of ws that serves it, merged in order (a later watch's win).
func CheckValuesOf(ws []*Watch, path string) map[string]any {
	var out map[string]any
	for _, w := range ws {
		if w.ChartPath() != path || len(w.CheckValues) == 0 {
			continue
		}
		if out == nil {
			out = map[string]any{}
		}
		out = helm.MergeValues(runtime.DeepCopyJSON(w.CheckValues), out)
	}
	return out
}
