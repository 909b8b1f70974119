package cli

import (
	"encoding/json"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/rudder-operator/rudder/internal/helm"
)

// The values a chart is scanned and scaffolded with: its defaults, and variants that turn on
// what its defaults leave off; and a rendered manifest split into objects.

// valuesVariant is one set of values the chart is rendered with.
type valuesVariant struct {
	how    string
	values map[string]any
}

// valueVariants are the chart's defaults under the user's values, then each boolean "enabled"
// value switched on.
func valueVariants(ch *helm.Chart, user map[string]any) []valuesVariant {
	variants := []valuesVariant{{"defaults", cloneValues(user)}}
	for _, p := range enabledPaths(ch.Values, "") {
		v := cloneValues(user)
		if err := setPath(v, p, true); err == nil {
			variants = append(variants, valuesVariant{p + "=true", v})
		}
	}
	return variants
}

// enabledPaths lists the dotted paths of every boolean "enabled" value.
func enabledPaths(values map[string]any, prefix string) []string {
	var out []string
	for k, v := range values {
		p := k
		if prefix != "" {
			p = prefix + "." + k
		}
		switch x := v.(type) {
		case bool:
			if k == "enabled" {
				out = append(out, p)
			}
		case map[string]any:
			out = append(out, enabledPaths(x, p)...)
		}
	}
	sort.Strings(out)
	return out
}

func setPath(m map[string]any, path string, v any) error {
	return unstructured.SetNestedField(m, v, strings.Split(path, ".")...)
}

func splitObjects(manifest string) []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	for _, doc := range strings.Split(manifest, "\n---") {
		var m map[string]any
		if err := yaml.Unmarshal([]byte(doc), &m); err != nil || len(m) == 0 {
			continue
		}
		u := &unstructured.Unstructured{Object: m}
		if u.GetKind() != "" {
			out = append(out, u)
		}
	}
	return out
}

// cloneValues is a deep copy of values.
func cloneValues(v map[string]any) map[string]any {
	out := map[string]any{}
	if b, err := json.Marshal(v); err == nil {
		_ = json.Unmarshal(b, &out)
	}
	return out
}
