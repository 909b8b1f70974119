package cli

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/rudder-operator/rudder/internal/guard"
	"github.com/rudder-operator/rudder/internal/helm"
)

// What a chart's defaults need of their watch beyond the kind's role: the identities they
// hand out that the chart does not make, and the limits past rudder's defaults.

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

// writePodSecurity writes the least Pod Security Standards level the chart's defaults pass,
// and why a stricter one refuses them.
func writePodSecurity(b *strings.Builder, s *chartScan) {
	if s.podSecurity == "" {
		return // no pod template
	}
	b.WriteString("  # The least Pod Security Standards level the chart's defaults pass: every pod template of a\n" +
		"  # release is held to it, so values can ask no privilege the defaults do not.\n")
	for i, why := range s.podSecurityWhy {
		if i == 5 {
			fmt.Fprintf(b, "  # ... and %d more\n", len(s.podSecurityWhy)-i)
			break
		}
		fmt.Fprintf(b, "  # %s\n", why)
	}
	for _, more := range s.podSecurityMore {
		fmt.Fprintf(b, "  # Other values need more, which is not granted: %s.\n", more)
	}
	fmt.Fprintf(b, "  podSecurity: %s\n", s.podSecurity)
}

// writeGrants writes the existing roles the chart's bindings bind and the rules of the roles it
// makes: what its releases may grant.
func writeGrants(b *strings.Builder, s *chartScan) {
	roles := map[string]*sourced{}
	for _, ref := range s.sortedBound() {
		if !s.made[ref] {
			// A name built from the release's stands for every release's (guard.ChartOwnOf).
			roles[ref.kind+"/"+strings.ReplaceAll(ref.name, scanRelease, guard.ReleasePlaceholder)] = s.bound[ref]
		}
	}
	if len(roles) > 0 {
		b.WriteString("  # Existing roles the chart's bindings bind: a release may bind only these and the roles it makes.\n")
		writeAllowed(b, "allowRoles", roles)
	}
	rules := s.defaultRules
	if len(rules) == 0 {
		return
	}
	b.WriteString("  # The rules of the roles the chart's defaults make: the roles of a release may grant no more\n" +
		"  # (resourceNames built from the release name are dropped).\n  allowRules:\n")
	for _, r := range dedupeRules(rules) {
		for line := range strings.SplitSeq(ruleYAML(r.rule), "\n") {
			if line != "" {
				b.WriteString("  " + line + "\n")
			}
		}
	}
}

// writeReferences writes what the chart's objects name and it does not make (allowReads), and
// the Services that set externalIPs (allowExternalIPs).
func writeReferences(b *strings.Builder, s *chartScan) {
	if len(s.reads) > 0 {
		b.WriteString("  # What the chart's objects name (a Pod's Secrets and ConfigMaps, an HPA's target, an Ingress's\n" +
			"  # Services) and it does not make: a release names, and looks up, only these besides its own.\n" +
			"  # An object may also say it is meant for one CR (annotation " + guard.AnnotationValuesFor + ").\n")
		if slices.ContainsFunc(sortedKeys(s.reads), func(k string) bool {
			return s.reads[k].byDefault && strings.Contains(k,
				guard.ReleasePlaceholder)
		}) {
			b.WriteString("  # What the defaults name after the release (" + guard.ReleasePlaceholder +
				") a release may name whatever it is called: the\n" +
				"  # defaults rendered for its own name decide it (a fullname helper drops a suffix when the\n" +
				"  # release's name holds the chart's); these entries are what its lookups may read.\n")
		}
		writeAllowed(b, "allowReads", s.reads)
	}
	if len(s.externalIPs) == 0 {
		return
	}
	keys := sortedKeys(s.externalIPs)
	b.WriteString("  # externalIPs takes that address's traffic from the whole cluster (CVE-2020-8554): " + strings.Join(keys, ", ") + "\n")
	if slices.ContainsFunc(keys, func(k string) bool { return s.externalIPs[k].byDefault }) {
		b.WriteString("  allowExternalIPs: true\n")
	} else {
		b.WriteString("  # allowExternalIPs: true\n")
	}
}

// watchYAML is the kind's watches.yaml entry: the chart, and what the chart's defaults render
// outside the CR's namespace, each under a comment naming what renders it. What only other
// values render is listed commented out.
func watchYAML(gvk schema.GroupVersionKind, chartDir string, s *chartScan) string {
	var b strings.Builder
	fmt.Fprintf(&b, "- group: %s\n  version: %s\n  kind: %s\n  chart: %s\n", gvk.Group, gvk.Version, gvk.Kind, chartDir)
	if names := sortedKeys(s.clusterNamed); len(names) > 0 {
		fmt.Fprintf(&b, "  # The chart names cluster-scoped objects after the release (%s): with the CR's\n"+
			"  # name alone, a CR of one name in another namespace would find them taken. The release is\n"+
			"  # named after the CR and its namespace: the namespace as 8 hex digits of its SHA-256, since\n"+
			"  # charts add suffixes to the release name and object names hold at most 63 characters.\n", strings.Join(names, ", "))
		fmt.Fprintf(&b, "  releaseName: %s\n", quoteYAML(NamespacedReleaseName))
	}
	writeCheckValues(&b, s)
	writeLimits(&b, s)
	writeIdentities(&b, s)
	writeGrants(&b, s)
	writePodSecurity(&b, s)
	writeReferences(&b, s)
	if len(s.cluster)+len(s.namespaces)+len(s.aggregates) == 0 {
		return b.String()
	}
	b.WriteString(`  # WARNING: each entry below lets every author of a CR of this kind create, change and delete
  # such objects outside the CR's namespace through the chart's values (extraObjects, tpl on
  # values), within what rudder's role grants. rudder still changes only objects a release made.
  # Delete an entry, or turn off the values that render it, to refuse it: the CR then fails
  # with a condition naming the object.
`)
	writeAllowed(&b, "allowClusterScoped", s.cluster)
	writeAllowed(&b, "allowedNamespaces", s.namespaces)
	if len(s.aggregates) > 0 {
		b.WriteString("  # A role with an aggregation label adds its rules to the roles that aggregate it, such as\n" +
			"  # view, edit and admin: every holder of those gains them.\n")
	}
	writeAllowed(&b, "allowAggregationLabels", s.aggregates)
	if s.crdsDir {
		b.WriteString("  # The chart's crds/ are installed with the release and, as Helm does, never changed after;\n" +
			"  # to apply a new chart version's CRDs on upgrade (a stored version is never dropped):\n" +
			"  # crds: {upgrade: CreateReplace}\n")
	}
	return b.String()
}
