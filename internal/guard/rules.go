package guard

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/rudder-operator/rudder/internal/records"
)

// The rules on what an object of a release may be, besides where it lives (confine.go): they
// hold for the manifest (post-renderer), every hook and the chart's crds/ alike, before an
// action's first write.

// foldedKeys are the keys whose value the checks read, per level: a document whose key at that
// level is one of them only under Unicode case folding ("nameſpace", "Kind") is refused, since
// a case-insensitive reader (encoding/json, which Helm sorts hooks with) and the API server
// (exact keys) would not see the same object.
var foldedKeys = map[string][]string{
	"": {"apiVersion", "kind", "metadata", "spec", "type", "data", "stringData", "rules", "aggregationRule"},
	"metadata": {"name", "namespace", "generateName", "labels", "annotations", "ownerReferences",
		"finalizers"},
}

// rules returns the violations of one object's content (nil: none).
func (c Confinement) rules(src Source, obj *unstructured.Unstructured) []Violation {
	var out []Violation
	add := func(why string) {
		out = append(out, Violation{Source: src, Kind: obj.GetKind(), Name: obj.GetName(), Namespace: obj.GetNamespace(), Why: why})
	}
	if k := foldedKey(obj.Object, ""); k != "" {
		add(k)
	}
	if md, ok := obj.Object["metadata"].(map[string]any); ok {
		if k := foldedKey(md, "metadata"); k != "" {
			add(k)
		}
	}
	if why := nonStringMetadata(obj); why != "" {
		add(why)
	}
	if why := recordShaped(obj); why != "" {
		add(why)
	}
	if why := aggregationLabels(c.AllowAggregationLabels).aggregates(obj); why != "" {
		add(why)
	}
	return out
}

// foldedKey describes the first key of m (at level) that is a key the checks read only under
// case folding; "" when there is none.
func foldedKey(m map[string]any, level string) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		for _, want := range foldedKeys[level] {
			if k != want && strings.EqualFold(k, want) {
				path := want
				if level != "" {
					path = level + "." + want
				}
				return fmt.Sprintf("has the key %q, which is %s only under Unicode case folding: the API server reads exact keys, so rudder refuses "+
					"it rather than check an object other than the one applied", k, path)
			}
		}
	}
	return ""
}

// nonStringMetadata says which label or annotation of obj has a value that is not a string
// ("" when all are strings). The API server refuses such an object, and so does Helm's
// install; read as a map of strings (as unstructured's accessors read it), its labels would
// all be dropped without a word.
func nonStringMetadata(obj *unstructured.Unstructured) string {
	md, _ := obj.Object["metadata"].(map[string]any)
	for _, field := range []string{"labels", "annotations"} {
		v, found := md[field]
		if !found || v == nil {
			continue
		}
		m, ok := v.(map[string]any)
		if !ok {
			return fmt.Sprintf("metadata.%s is %s, not a map of strings", field, jsonKind(v))
		}
		keys := make([]string, 0, len(m))
		for k := range m {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			if _, ok := m[k].(string); !ok {
				return fmt.Sprintf("metadata.%s.%s is %s %v, not a string (quote it in the template: the API server refuses it, as Helm's install "+
					"does)",
					field, k, jsonKind(m[k]), m[k])
			}
		}
	}
	return ""
}

// jsonKind names the JSON type of a decoded value.
func jsonKind(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "a boolean"
	case int64, uint64, float64:
		return "a number"
	case map[string]any:
		return "an object"
	case []any:
		return "a list"
	}
	return fmt.Sprintf("%T", v)
}

// recordShaped says why an object is one Helm's storage would read as a release record (its
// name, type or labels); "" when it is not. Only rudder's storage writes records: a rendered
// one could pose as a revision of any release in the namespace.
func recordShaped(obj *unstructured.Unstructured) string {
	gvk := obj.GroupVersionKind()
	if gvk.Group != "" || (gvk.Kind != "Secret" && gvk.Kind != "ConfigMap") {
		return ""
	}
	var why []string
	if strings.HasPrefix(obj.GetName(), records.RecordPrefix) {
		why = append(why, "its name starts with "+records.RecordPrefix)
	}
	if t, _, _ := unstructured.NestedString(obj.Object, "type"); gvk.Kind == "Secret" && t == records.RecordType {
		why = append(why, "its type is "+records.RecordType)
	}
	if obj.GetLabels()["owner"] == "helm" {
		why = append(why, `it has the label owner=helm`)
	}
	if len(why) == 0 {
		return ""
	}
	return "shaped like a Helm release record (" + strings.Join(why, ", ") + "): only rudder's release storage writes those"
}

// AggregationMarker is in the key of every label that, by convention, puts a ClusterRole's
// rules into an aggregated role (rbac.authorization.k8s.io/aggregate-to-admin,
// rudder.dev/aggregate-to-manager).
const AggregationMarker = "aggregate-to-"

// aggregationLabels are the label keys by which a watch's roles may aggregate: its
// allowAggregationLabels ("*": any).
type aggregationLabels []string

// aggregates says why a Role or ClusterRole would add rules to, or collect rules from, roles
// others hold, through a label the watch's allowAggregationLabels does not name; "" otherwise.
func (allowed aggregationLabels) aggregates(obj *unstructured.Unstructured) string {
	gvk := obj.GroupVersionKind()
	if gvk.Group != "rbac.authorization.k8s.io" || (gvk.Kind != "ClusterRole" && gvk.Kind != "Role") {
		return ""
	}
	var keys []string
	for k := range obj.GetLabels() {
		if strings.Contains(k, AggregationMarker) && !allowed.allow(k) {
			keys = append(keys, k)
		}
	}
	if len(keys) > 0 {
		sort.Strings(keys)
		return fmt.Sprintf("carries the aggregation label %s, which adds its rules to roles others hold, and the watch's allowAggregationLabels "+
			"does not name it",
			strings.Join(keys, ", "))
	}
	sel, _, _ := unstructured.NestedSlice(obj.Object, "aggregationRule", "clusterRoleSelectors")
	for _, s := range sel {
		for _, k := range selectorKeys(s) {
			if !allowed.allow(k) {
				return fmt.Sprintf("has an aggregationRule selecting the label %s, which collects the rules of roles others made, and the watch's "+
					"allowAggregationLabels does not name it", k)
			}
		}
	}
	if _, found := obj.Object["aggregationRule"]; found && len(sel) == 0 {
		return "has an aggregationRule without selectors rudder can read"
	}
	return ""
}

// selectorKeys are the label keys a LabelSelector (as JSON) reads.
func selectorKeys(s any) []string {
	m, _ := s.(map[string]any)
	var keys []string
	if ml, ok := m["matchLabels"].(map[string]any); ok {
		for k := range ml {
			keys = append(keys, k)
		}
	}
	if me, ok := m["matchExpressions"].([]any); ok {
		for _, e := range me {
			if em, ok := e.(map[string]any); ok {
				k, _ := em["key"].(string)
				keys = append(keys, k)
			}
		}
	}
	if len(keys) == 0 {
		keys = append(keys, "(every label: the selector is empty)")
	}
	sort.Strings(keys)
	return keys
}

// allow reports whether roles may aggregate by label key.
func (allowed aggregationLabels) allow(key string) bool {
	return slices.Contains(allowed, key) || slices.Contains(allowed, "*")
}

// CheckManifestObject decides one object of a release's manifest whose kind's scope is known:
// the rules on its content first, then where it may be (nil: allowed).
func (c Confinement) CheckManifestObject(obj *unstructured.Unstructured, namespaced bool) []Violation {
	if vs := c.rules(SourceManifest, obj); len(vs) > 0 {
		return vs
	}
	if v := c.checkObject(SourceManifest, obj.GroupVersionKind(), obj.GetName(), obj.GetNamespace(), namespaced); v != nil {
		return []Violation{*v}
	}
	return nil
}
