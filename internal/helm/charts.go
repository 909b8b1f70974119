package helm

import (
	"helm.sh/helm/v4/pkg/chart/common"
	commonutil "helm.sh/helm/v4/pkg/chart/common/util"
	"helm.sh/helm/v4/pkg/chart/loader/archive"
	chart "helm.sh/helm/v4/pkg/chart/v2"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	"helm.sh/helm/v4/pkg/cli/values"
	"helm.sh/helm/v4/pkg/getter"
	"helm.sh/helm/v4/pkg/strvals"
)

// Helm's charts and values language, as the packages above the Helm layer use them: a chart
// passes through them as a value (Chart), and values are layered as Helm layers them.

// Chart is a chart as Helm loads it.
type Chart = chart.Chart

// Capabilities are what a render knows of the cluster (.Capabilities).
type Capabilities = common.Capabilities

// CopyChart is a private copy of ch, loaded anew from the files it was loaded from: Helm's
// actions modify the chart they are given.
func CopyChart(ch *Chart) (*Chart, error) {
	files := make([]*archive.BufferedFile, 0, len(ch.Raw))
	for _, f := range ch.Raw {
		files = append(files, &archive.BufferedFile{Name: f.Name, Data: f.Data})
	}
	return loader.LoadFiles(files)
}

// NewCapabilities are Helm's default capabilities with kubeVersion ("": Helm's default) and
// apiVersions added.
func NewCapabilities(kubeVersion string, apiVersions ...string) (*Capabilities, error) {
	caps := common.DefaultCapabilities.Copy()
	if kubeVersion != "" {
		kv, err := common.ParseKubeVersion(kubeVersion)
		if err != nil {
			return nil, err
		}
		caps.KubeVersion = *kv
	}
	caps.APIVersions = append(caps.APIVersions, apiVersions...)
	return caps, nil
}

// MergeValues merges src into dst, dst winning, as Helm merges tables (commonutil.MergeTables),
// and returns dst.
func MergeValues(dst, src map[string]any) map[string]any { return commonutil.MergeTables(dst, src) }

// CoalesceValues is dst over src as Helm layers a user's values over a chart's defaults
// (commonutil.CoalesceTables: a null in dst removes the key).
func CoalesceValues(dst, src map[string]any) map[string]any {
	return commonutil.CoalesceTables(dst, src)
}

// ParseSet sets one `--set` expression ("a.b=c") into dest.
func ParseSet(expr string, dest map[string]any) error { return strvals.ParseInto(expr, dest) }

// ParseSetString sets one `--set-string` expression into dest.
func ParseSetString(expr string, dest map[string]any) error {
	return strvals.ParseIntoString(expr, dest)
}

// ValueOptions are helm's --values, --set and --set-string.
type ValueOptions struct {
	ValueFiles, Values, StringValues []string
}

// Merge is the values the options give, as `helm template` merges them (local files only).
func (o ValueOptions) Merge() (map[string]any, error) {
	v := values.Options{ValueFiles: o.ValueFiles, Values: o.Values, StringValues: o.StringValues}
	return v.MergeValues(getter.Providers{})
}
