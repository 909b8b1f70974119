package cli

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"helm.sh/helm/v3/pkg/release"

	"github.com/rudder-operator/rudder/internal/guard"
	"github.com/rudder-operator/rudder/internal/helm"
)

// What a chart's defaults need of their watch beyond the kind's role: the identities they
// hand out that the chart does not make, and the limits past rudder's defaults.

// The bounds of scaffold's renders: far above any chart's, so that scaffold measures what a
// chart renders and writes the limits it needs instead of failing on the defaults.
const (
	scanMaxObjects = 100000
	scanMaxBytes   = 64 << 20
)

// releaseSize is the larger of rel's manifest and its hooks' manifests together, in bytes,
// and how many objects both hold.
func releaseSize(rel *release.Release) (int64, int) {
	hooks := int64(0)
	objs := len(splitObjects(rel.Manifest))
	for _, h := range rel.Hooks {
		hooks += int64(len(h.Manifest))
		objs += len(splitObjects(h.Manifest))
	}
	return max(int64(len(rel.Manifest)), hooks), objs
}

// addIdentities records the identities a render hands out that it does not make.
func (s *chartScan) addIdentities(rel *release.Release, how string) error {
	needs, err := guard.NeededIdentities(scanNamespace, rel)
	if err != nil {
		return err
	}
	byDefault := how == "defaults"
	for _, sa := range needs.ServiceAccounts {
		addSourced(s.serviceAccounts, sa, "Pods run as it, or a token or binding names it ("+how+")", byDefault)
	}
	for _, sub := range needs.Subjects {
		key := fmt.Sprintf("{kind: %s, name: %s}", sub.Kind, quoteYAML(sub.Name))
		if sub.Namespace != "" {
			key = fmt.Sprintf("{kind: %s, name: %s, namespace: %s}", sub.Kind, quoteYAML(sub.Name), quoteYAML(sub.Namespace))
		}
		addSourced(s.subjects, key, "a binding names it ("+how+")", byDefault)
	}
	return nil
}

// writeCheckValues writes the values scaffold was given as the watch's checkValues: the chart
// is linted with them when it loads, so that a chart whose schema requires a value with no
// default (which every CR gives) loads.
func writeCheckValues(b *strings.Builder, s *chartScan) {
	if len(s.user) == 0 {
		return
	}
	j, err := json.Marshal(s.user) // decoded from YAML and --set: JSON encodes every value
	if err != nil {
		fmt.Fprintf(b, "  # checkValues: the values given to scaffold do not encode: %v\n", err)
		return
	}
	b.WriteString("  # What every CR of the kind gives at least (scaffold's --set and --values): the chart is\n" +
		"  # checked with it when it loads.\n")
	fmt.Fprintf(b, "  checkValues: %s\n", j)
}

// writeLimits writes the limits the chart's defaults need beyond helm.Limits' defaults, with
// a quarter to spare, rounded up to MiB and hundreds.
func writeLimits(b *strings.Builder, s *chartScan) {
	var limits []string
	if s.manifestBytes > helm.DefaultMaxManifestBytes {
		mi := (s.manifestBytes + s.manifestBytes/4 + 1<<20 - 1) >> 20
		limits = append(limits, fmt.Sprintf("maxManifestBytes: %dMi", mi))
	}
	if s.objects > helm.DefaultMaxObjects {
		limits = append(limits, fmt.Sprintf("maxObjects: %d", (s.objects+s.objects/4+99)/100*100))
	}
	if len(limits) == 0 {
		return
	}
	fmt.Fprintf(b, "  # The chart's defaults render %d bytes and %d objects, over rudder's default limits\n"+
		"  # (%d bytes, %d objects): these let them through, with a quarter to spare.\n", s.manifestBytes, s.objects,
		helm.DefaultMaxManifestBytes, helm.DefaultMaxObjects)
	fmt.Fprintf(b, "  limits: {%s}\n", strings.Join(limits, ", "))
}

// writeIdentities writes the identities the chart's defaults hand out that it does not make.
func writeIdentities(b *strings.Builder, s *chartScan) {
	if len(s.serviceAccounts)+len(s.subjects) == 0 {
		return
	}
	b.WriteString(`  # The chart runs Pods as, makes tokens for, or binds identities it does not make itself: a
  # release may hand out only those named here (every CR author of the kind can then use
  # them through values). Point the values at a ServiceAccount the platform provides.
`)
	writeAllowed(b, "allowServiceAccounts", s.serviceAccounts)
	keys := sortedKeys(s.subjects)
	if len(keys) == 0 {
		return
	}
	prefix := "  # "
	if slices.ContainsFunc(keys, func(k string) bool { return s.subjects[k].byDefault }) {
		prefix = "  "
	}
	b.WriteString(prefix + "allowSubjects:\n")
	for _, k := range keys {
		p := "  "
		if !s.subjects[k].byDefault {
			p = "  # "
		}
		fmt.Fprintf(b, "%s- %s # %s\n", p, k, strings.Join(s.subjects[k].how, "; "))
	}
}
