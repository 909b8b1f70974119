package helm

import (
	"fmt"
	"strings"

	commonutil "helm.sh/helm/v4/pkg/chart/common/util"
	chart "helm.sh/helm/v4/pkg/chart/v2"

	"github.com/rudder-operator/rudder/internal/records"
	"github.com/rudder-operator/rudder/internal/render"
)

// ValidateValues checks the final values (chart defaults coalesced) against the chart's
// values.schema.json and its subcharts' (their $refs confined to the chart, see
// render.ValidateValues); a chart without one accepts anything.
func ValidateValues(ch *chart.Chart, values map[string]any) error {
	if len(ch.Schema) == 0 {
		return nil
	}
	vals, err := commonutil.CoalesceValues(ch, values)
	if err != nil {
		return err
	}
	return render.ValidateValues(ch, vals)
}

// ChartRef is a chart as status.release.chart, Events and revision descriptions name it:
// "name-version", as Helm's own `helm list` does.
func ChartRef(ch *chart.Chart) string {
	if ch == nil || ch.Metadata == nil {
		return ""
	}
	return ch.Name() + "-" + ch.Metadata.Version
}

// Description is the description of a revision rudder makes: it reads like a changelog in
// `helm history` ("rudder upgrade: generation 3, chart nginx-1.2.0@8b3b44e738b2, values …").
func Description(action string, generation int64, ch *chart.Chart, chartDigest, valuesDigest string, overridden []string) string {
	desc := fmt.Sprintf("rudder %s: generation %d, chart %s@%s, values %s", action, generation,
		ChartRef(ch), records.DisplayDigest(chartDigest), records.DisplayDigest(valuesDigest))
	if len(overridden) > 0 {
		desc += ", overrides " + strings.Join(overridden, ",")
	}
	if len(desc) > 250 {
		desc = desc[:247] + "..."
	}
	return desc
}
