package watches

import (
	"errors"
	"fmt"
	"regexp"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/yaml"

	"github.com/rudder-operator/rudder/internal/guard"
	"github.com/rudder-operator/rudder/internal/helm"
)

// DefaultValuesKey is the key a source's values are read from unless it names another.
const DefaultValuesKey = "values.yaml"

// A ConfigMap's and Secret's keys.
var dataKey = regexp.MustCompile(`^[-._a-zA-Z0-9]+$`)

// AnnotationValuesFor, on a Secret or ConfigMap, names the CRs whose valuesFrom may read it
// when the source's name comes from the CR (guard.AnnotationValuesFor, which also lets a
// release's objects name it).
const AnnotationValuesFor = guard.AnnotationValuesFor

// Claims reports whether a source whose AnnotationValuesFor is annotation is meant for the CR
// named ref.
func Claims(annotation, ref string) bool { return guard.Claims(annotation, ref) }

// UnclaimedError: a source whose name comes from the CR does not name the CR in its
// AnnotationValuesFor; nothing of it was read.
type UnclaimedError struct{ Source Source }

func (e *UnclaimedError) Error() string {
	return fmt.Sprintf("%s: its name comes from the CR, and its annotation %s does not name %s: a source named after a CR is read only when "+
		"it says it is meant for that CR",
		e.Source, AnnotationValuesFor, e.Source.For)
}

// crRef is obj as AnnotationValuesFor names it.
func crRef(obj *unstructured.Unstructured) string {
	return guard.ClaimRef(obj.GroupVersionKind().GroupKind(), obj.GetName())
}

// String names the source in messages (never its content).
func (s Source) String() string {
	return fmt.Sprintf("%s %s/%s key %q (%s)", s.Kind, s.Namespace, s.Name, s.Key, s.Field)
}

func (ck checking) checkValuesFrom() error {
	w := ck.w
	for i := range w.ValuesFrom {
		v := &w.ValuesFrom[i]
		field := fmt.Sprintf("valuesFrom[%d]", i)
		switch {
		case v.Kind != "Secret" && v.Kind != "ConfigMap":
			return fmt.Errorf("%s.kind: %q must be Secret or ConfigMap", field, v.Kind)
		case v.Name == "":
			return fmt.Errorf("%s.name: required", field)
		case v.ValuesKey != "" && !dataKey.MatchString(v.ValuesKey):
			return fmt.Errorf("%s.valuesKey: %q is not a key a %s may hold", field, v.ValuesKey, v.Kind)
		}
		if v.TargetPath != "" {
			if err := helm.ParseSet(v.TargetPath+"=x", map[string]any{}); err != nil || strings.ContainsAny(v.TargetPath, "=,") {
				return fmt.Errorf("%s.targetPath: %q is not a dotted path such as db.password", field, v.TargetPath)
			}
		}
		t, err := newTemplate(field+".name", v.Name)
		if err != nil {
			return fmt.Errorf("%s.name: %w", field, err)
		}
		v.nameTpl = t
	}
	return nil
}

// SourcesOf renders the watch's valuesFrom for a CR. A name must be an object name: a source
// is always read in the CR's own namespace.
func (w *Watch) SourcesOf(obj *unstructured.Unstructured) ([]Source, error) {
	out := make([]Source, 0, len(w.ValuesFrom))
	for i, v := range w.ValuesFrom {
		field := fmt.Sprintf("valuesFrom[%d]", i)
		var b strings.Builder
		if err := v.nameTpl.Execute(&b, obj.Object); err != nil {
			return nil, fmt.Errorf("%s.name: %w", field, err)
		}
		name := strings.TrimSpace(b.String())
		if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 {
			return nil, fmt.Errorf("%s.name: %q is not the name of a %s in the CR's namespace: %s", field, name, v.Kind, strings.Join(errs, "; "))
		}
		key := v.ValuesKey
		if key == "" {
			key = DefaultValuesKey
		}
		src := Source{Kind: v.Kind, Namespace: obj.GetNamespace(), Name: name, Key: key, TargetPath: v.TargetPath,
			Optional: v.Optional, Field: field}
		if strings.Contains(v.Name, "{{") {
			src.For = crRef(obj)
		}
		out = append(out, src)
	}
	return out, nil
}

// ErrSourceMissing: a source that is not optional is missing (its object or its key).
var ErrSourceMissing = errors.New("missing")

// MergeSources merges what each source holds (nil: missing) into the values the CR's spec goes
// on top of, in order. A Secret's content never appears in an error.
func MergeSources(srcs []Source, contents [][]byte) (map[string]any, error) {
	out := map[string]any{}
	for i, s := range srcs {
		c := contents[i]
		switch {
		case c == nil && s.Optional:
			continue
		case c == nil:
			return nil, fmt.Errorf("%s: %w", s, ErrSourceMissing)
		case s.TargetPath != "":
			v := strings.NewReplacer(`\`, `\\`, `,`, `\,`).Replace(string(c))
			if err := helm.ParseSetString(s.TargetPath+"="+v, out); err != nil {
				return nil, fmt.Errorf("%s: targetPath %s: %w", s, s.TargetPath, err)
			}
			continue
		}
		var m map[string]any
		if err := yaml.Unmarshal(c, &m); err != nil {
			if s.Kind == "Secret" {
				return nil, fmt.Errorf("%s: not a YAML map of values", s) // the parser quotes the content
			}
			return nil, fmt.Errorf("%s: not a YAML map of values: %w", s, err)
		}
		if m == nil {
			m = map[string]any{}
		}
		out = helm.MergeValues(m, out) // the later source wins
	}
	return out, nil
}
