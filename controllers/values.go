package controllers

import (
	"fmt"
	"sort"
	"strings"

	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/strvals"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rudder-operator/rudder/internal/helm"
	"github.com/rudder-operator/rudder/internal/watches"
)

// The functions here build what rudder releases for a CR. Every pass and `rudder template`
// use them, in this order, so that the two never disagree: ReleaseName, Values, the kind's
// PreRelease hooks, ValidateValues, helm.ValuesDigest, NewRequest.

// ReleaseName renders the watch's releaseName template for a CR (default: the CR name) and
// fits it into Helm's 53 characters.
func ReleaseName(w *watches.Watch, obj *unstructured.Unstructured) (string, error) {
	name, err := w.ReleaseNameFor(obj.Object)
	if err != nil {
		return "", err
	}
	if name == "" {
		name = obj.GetName()
	}
	return helm.ReleaseName(name), nil
}

// Values is a CR's spec, with the watch's overrideValues on top (parsed like `helm --set`,
// commas in a value kept literally). It returns the override keys it applied, sorted.
func Values(w *watches.Watch, obj *unstructured.Unstructured) (map[string]any, []string, error) {
	spec, _, _ := unstructured.NestedMap(obj.Object, "spec") // a deep copy
	if spec == nil {
		spec = map[string]any{}
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
		if err := strvals.ParseInto(k+"="+v, spec); err != nil {
			return nil, nil, fmt.Errorf("overrideValues.%s: %w", k, err)
		}
	}
	return spec, keys, nil
}

// ValidateValues checks the final values (chart defaults coalesced) against the chart's
// values.schema.json; a chart without one accepts anything.
func ValidateValues(ch *chart.Chart, values map[string]any) error {
	if len(ch.Schema) == 0 {
		return nil
	}
	vals, err := chartutil.CoalesceValues(ch, values)
	if err != nil {
		return err
	}
	return chartutil.ValidateAgainstSchema(ch, vals)
}

// Description is a revision's description: it reads like a changelog in `helm history`.
func Description(action string, generation int64, ch *chart.Chart, chartDigest, valuesDigest string, overridden []string) string {
	desc := fmt.Sprintf("rudder %s: generation %d, chart %s-%s@%s, values %s", action, generation,
		ch.Name(), ch.Metadata.Version, helm.DisplayDigest(chartDigest), helm.DisplayDigest(valuesDigest))
	if len(overridden) > 0 {
		desc += ", overrides " + strings.Join(overridden, ",")
	}
	return truncate(desc, 250)
}

// NewRequest is the install or upgrade request for a CR. ch must be a private copy of the chart.
func NewRequest(w *watches.Watch, obj *unstructured.Unstructured, scope helm.Scope, releaseName string,
	ch *chart.Chart, chartDigest string, values map[string]any, valuesDigest, description string) *helm.Request {
	return &helm.Request{
		Owner:        helm.Owner{GVK: w.GroupVersionKind(), Key: client.ObjectKeyFromObject(obj), UID: obj.GetUID()},
		Scope:        scope,
		ReleaseName:  releaseName,
		Chart:        ch,
		ChartDigest:  chartDigest,
		Values:       values,
		ValuesDigest: valuesDigest,
		MaxHistory:   w.HistoryLimit(),
		Description:  description,
	}
}
