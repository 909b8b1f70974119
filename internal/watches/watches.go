package watches

import (
	"bytes"
	"fmt"
	"strings"
	"text/template"

	"github.com/Masterminds/sprig/v3"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Defaults applied to fields a watch leaves out.
const (
	DefaultMaxHistory = 10
)

// GroupVersionKind of the watched CRs.
func (w *Watch) GroupVersionKind() schema.GroupVersionKind { return w.gvk }

// ChartPath is the absolute chart directory.
func (w *Watch) ChartPath() string { return w.chartPath }

// LabelSelector is the parsed Selector (labels.Everything() when unset).
func (w *Watch) LabelSelector() labels.Selector { return w.selector }

// WatchesDependents reports whether the release's objects are watched for drift.
func (p Policies) WatchesDependents() bool {
	return p.w.WatchDependentResources == nil || *p.w.WatchDependentResources
}

// RollsBack reports whether a failed upgrade is rolled back automatically.
func (p Policies) RollsBack() bool { return p.w.RollbackOnFailure == nil || *p.w.RollbackOnFailure }

// HistoryLimit is the number of revisions Helm keeps (maxHistory, or its default).
func (p Policies) HistoryLimit() int {
	if p.w.MaxHistory == nil {
		return DefaultMaxHistory
	}
	return *p.w.MaxHistory
}

// String names the watch in messages: Kind.group/version.
func (w *Watch) String() string { return w.gvk.Kind + "." + w.gvk.Group + "/" + w.gvk.Version }

func newTemplate(name, text string) (*template.Template, error) {
	return template.New(name).Funcs(sprig.TxtFuncMap()).Parse(text)
}

// Overrides renders overrideValues for one CR (given as its unstructured content).
func (w *Watch) Overrides(cr map[string]any) (map[string]string, error) {
	out := make(map[string]string, len(w.overrideTmpls))
	for key, t := range w.overrideTmpls {
		var buf bytes.Buffer
		if err := t.Execute(&buf, cr); err != nil {
			return nil, fmt.Errorf("overrideValues.%s: %w", key, err)
		}
		// As in Helm templates, a missing key renders as nothing.
		out[key] = strings.ReplaceAll(buf.String(), "<no value>", "")
	}
	return out, nil
}
