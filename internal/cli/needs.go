package cli

import (
	"cmp"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/rudder-operator/rudder/internal/guard"
	"github.com/rudder-operator/rudder/internal/helm"
	"github.com/rudder-operator/rudder/internal/release"
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

// addIdentities records what a render hands out, asks of a node and names that it does not
// make: identities, the pod security level, externalIPs and references.
func (s *chartScan) addIdentities(rel *release.Release, how string) error {
	needs, err := guard.NeededBy(scanNamespace, rel)
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
	for entry, fields := range needs.Reads {
		for _, f := range fields {
			addSourced(s.reads, entry, strings.ReplaceAll(f, scanRelease, guard.ReleasePlaceholder)+" ("+how+")", byDefault)
		}
	}
	for _, svc := range needs.ExternalIPs {
		addSourced(s.externalIPs, strings.ReplaceAll(svc, scanRelease, guard.ReleasePlaceholder), how, byDefault)
	}
	level := cmp.Or(needs.PodSecurity, guard.PodSecurityRestricted)
	if byDefault {
		s.podSecurity = level
		for _, why := range needs.PodSecurityWhy {
			s.podSecurityWhy = append(s.podSecurityWhy, strings.ReplaceAll(why, scanRelease, guard.ReleasePlaceholder))
		}
	} else if slices.Index(guard.PodSecurityLevels, level) > slices.Index(guard.PodSecurityLevels, s.podSecurity) {
		s.podSecurityMore = append(s.podSecurityMore, fmt.Sprintf("with %s: %s", how, level))
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
			roles[ref.kind+"/"+ref.name] = s.bound[ref]
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
