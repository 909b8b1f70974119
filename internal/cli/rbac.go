package cli

import (
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"
)

// allVerbs are what rudder does to an operand: install, watch, restore drift, uninstall.
var allVerbs = []string{"get", "list", "watch", "create", "update", "patch", "delete"}

// roleRules are the rules of the kind's ClusterRole, each with where it came from:
//   - the CR kind, its status and finalizers;
//   - every kind the chart renders, with the verbs rudder needs to install, watch, restore and
//     delete it (a kind neither client-go nor the chart's CRDs know gets its guessed plural);
//   - the rules of every Role and ClusterRole the chart renders: the API server lets rudder
//     create a role only if rudder holds each of its rules;
//   - `bind` on each existing role a rendered binding references;
//   - `escalate` on the ClusterRoles the chart renders with an aggregationRule: the API server
//     lets only a holder of it create one (what they aggregate is held by allowAggregationLabels);
//   - get and list on the kinds the templates look up.
func (s *chartScan) roleRules(owner schema.GroupVersionKind, plural string) []sourcedRule {
	g := owner.Group
	out := []sourcedRule{
		{rbacv1.PolicyRule{APIGroups: []string{g}, Resources: []string{plural}, Verbs: []string{"get", "list", "watch", "update", "patch"}},
			"the kind's CRs (rudder watches them and keeps its finalizer)"},
		{rbacv1.PolicyRule{APIGroups: []string{g}, Resources: []string{plural + "/status"}, Verbs: []string{"get", "update", "patch"}},
			"the kind's status"},
		{rbacv1.PolicyRule{APIGroups: []string{g}, Resources: []string{plural + "/finalizers"}, Verbs: []string{"update"}},
			"the kind's finalizers (owner references that block deletion)"},
	}
	for _, u := range s.sortedKinds() {
		why := "the chart renders it with: " + strings.Join(u.how, "; ")
		if u.guessed {
			why += fmt.Sprintf("; %s (%s) is not a built-in kind: resource %q is its guessed plural, check it with kubectl api-resources",
				u.gvk.Kind, u.gvk.GroupVersion(), u.resource)
		}
		out = append(out, sourcedRule{rbacv1.PolicyRule{APIGroups: []string{u.gvk.Group}, Resources: []string{u.resource}, Verbs: allVerbs}, why})
	}
	out = append(out, s.copied...)
	for _, ref := range s.sortedBound() {
		if s.made[ref] {
			continue // a role the chart renders: rudder holds its rules
		}
		res := "clusterroles"
		if ref.kind == "Role" {
			res = "roles"
		}
		out = append(out, sourcedRule{rbacv1.PolicyRule{APIGroups: []string{rbacv1.GroupName}, Resources: []string{res},
			Verbs: []string{"bind"}, ResourceNames: []string{ref.name}},
			fmt.Sprintf("bind the existing %s %s: %s", ref.kind, ref.name, strings.Join(s.bound[ref].how, "; "))})
	}
	out = append(out, s.escalate...)
	out = append(out, s.lookups...)
	return dedupeRules(out)
}

// dedupeRules keeps the first of equal rules, with every reason.
func dedupeRules(in []sourcedRule) []sourcedRule {
	var out []sourcedRule
	at := map[string]int{}
	for _, r := range in {
		b, _ := json.Marshal(r.rule)
		if i, dup := at[string(b)]; dup {
			if !strings.Contains(out[i].why, strings.SplitN(r.why, " (with ", 2)[0]) {
				out[i].why += "\n" + r.why
			}
			continue
		}
		at[string(b)] = len(out)
		out = append(out, r)
	}
	return out
}

func (s *chartScan) sortedKinds() []*kindUse {
	out := make([]*kindUse, 0, len(s.kinds))
	for _, u := range s.kinds {
		if u.resource != "" {
			out = append(out, u)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].gvk.String() < out[j].gvk.String() })
	return out
}

func (s *chartScan) sortedBound() []roleRef {
	out := make([]roleRef, 0, len(s.bound))
	for r := range s.bound {
		out = append(out, r)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].kind+"/"+out[i].name < out[j].kind+"/"+out[j].name })
	return out
}

// roleYAML is the kind's ClusterRole as YAML, each rule under a comment saying where it came
// from. It carries the label config/rbac's rudder-manager aggregates.
func roleYAML(name string, rules []sourcedRule) string {
	var b strings.Builder
	b.WriteString("# Written by rudder scaffold: what rudder needs to serve the kind as its own ServiceAccount.\n")
	b.WriteString("# config/rbac's rudder-manager ClusterRole aggregates it (label " + AggregateLabel + ").\n")
	fmt.Fprintf(&b, "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata:\n  name: %s\n  labels: {%s: \"true\"}\nrules:\n",
		name, AggregateLabel)
	for _, r := range rules {
		for line := range strings.SplitSeq(r.why, "\n") {
			b.WriteString("# " + line + "\n")
		}
		b.WriteString(ruleYAML(r.rule))
	}
	return b.String()
}

// NamespacedReleaseName is the releaseName scaffold writes for a chart that names
// cluster-scoped objects after the release.
const NamespacedReleaseName = "{{ .metadata.name }}-{{ .metadata.namespace | sha256sum | trunc 8 }}"

// writeAllowed writes one list of the watch entry: what the defaults render, then, commented
// out, what only other values do.
func writeAllowed(b *strings.Builder, field string, m map[string]*sourced) {
	keys := sortedKeys(m)
	if len(keys) == 0 {
		return
	}
	if slices.ContainsFunc(keys, func(k string) bool { return m[k].byDefault }) {
		b.WriteString("  " + field + ":\n")
	} else {
		b.WriteString("  # " + field + ":\n")
	}
	for _, k := range keys {
		prefix := "  "
		if !m[k].byDefault {
			prefix = "  # "
		}
		fmt.Fprintf(b, "%s- %s # %s\n", prefix, quoteYAML(k), strings.Join(m[k].how, "; "))
	}
}

// quoteYAML is a scalar as YAML writes it.
func quoteYAML(s string) string {
	y, _ := yaml.Marshal(s)
	return strings.TrimSpace(string(y))
}

// ruleYAML is one rule as a YAML list item, its lists in flow style.
func ruleYAML(r rbacv1.PolicyRule) string {
	var b strings.Builder
	lead := "- "
	for _, f := range []struct {
		key  string
		vals []string
	}{{"apiGroups", r.APIGroups}, {"resources", r.Resources}, {"resourceNames", r.ResourceNames},
		{"nonResourceURLs", r.NonResourceURLs}, {"verbs", r.Verbs}} {
		if f.vals == nil {
			continue
		}
		quoted := make([]string, len(f.vals))
		for i, v := range f.vals {
			quoted[i] = quoteYAML(v)
		}
		fmt.Fprintf(&b, "%s%s: [%s]\n", lead, f.key, strings.Join(quoted, ", "))
		lead = "  "
	}
	return b.String()
}

// AggregateLabel marks the ClusterRoles that config/rbac's rudder-manager role aggregates: a
// scaffolded kind's role reaches rudder's ServiceAccount with no binding of its own.
const AggregateLabel = "rudder.dev/aggregate-to-manager"
