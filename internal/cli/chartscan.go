package cli

import (
	"slices"
	"sort"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// What a scan of a chart finds (chartScan, scan.go), which scaffold writes the RBAC and the
// watch from (rbac.go, needs.go) and lint reports.

// kindUse is a kind the chart renders, and with which values.
type kindUse struct {
	gvk        schema.GroupVersionKind
	resource   string
	namespaced bool
	// guessed: neither client-go's scheme nor the chart's CRDs know the kind; its resource is
	// the guessed plural and its scope assumed namespaced.
	guessed bool
	how     []string
}

// sourced is a value with the reasons it is needed, the defaults' first.
type sourced struct {
	byDefault bool     // the chart's defaults (or the user's values) render it
	how       []string // up to three reasons
}

func (s *sourced) add(how string, byDefault bool) {
	s.byDefault = s.byDefault || byDefault
	if len(s.how) < 3 && !slices.Contains(s.how, how) {
		s.how = append(s.how, how)
	}
}

// roleRef is a Role or ClusterRole by kind and name.
type roleRef struct{ kind, name string }

// chartScan is what rendering a chart without a cluster tells about what serving it needs:
// the kinds it renders, the rules of its roles, the existing roles its bindings bind, the
// cluster-scoped kinds, fixed namespaces and aggregation labels its watch must allow.
type chartScan struct {
	mapper     meta.RESTMapper
	crds       map[schema.GroupKind]kindUse // the chart's own CRDs (crds/ and templates)
	kinds      map[schema.GroupKind]*kindUse
	copied     []sourcedRule
	made       map[roleRef]bool
	bound      map[roleRef]*sourced
	cluster    map[string]*sourced // allowClusterScoped entries
	namespaces map[string]*sourced // allowedNamespaces entries
	aggregates map[string]*sourced // allowAggregationLabels entries
	// serviceAccounts and subjects are the identities the chart hands out that it does not
	// make: allowServiceAccounts entries, and allowSubjects entries as YAML flow mappings.
	serviceAccounts map[string]*sourced
	subjects        map[string]*sourced
	// clusterNamed are the cluster-scoped objects named after the release: two CRs of one
	// name in two namespaces would contend for them.
	clusterNamed map[string]*sourced
	// user are the values scaffold was given (--set, --values), which its CRs give at least.
	user map[string]any
	// manifestBytes and objects are what the defaults render: the larger of the manifest and
	// the hooks' manifests, and the objects of both.
	manifestBytes int64
	objects       int
	lookups       []sourcedRule
	// escalate are the rules that let rudder create the chart's aggregated ClusterRoles.
	escalate []sourcedRule
	// defaultRules are the rules of the roles the defaults render (allowRules).
	defaultRules []sourcedRule
	// reads are the allowReads entries of what the chart's objects name and it does not make;
	// externalIPs the Services that set externalIPs.
	reads, externalIPs map[string]*sourced
	// podSecurity is the least level the defaults' pod templates pass, podSecurityWhy what a
	// stricter level refuses, podSecurityMore the other values that need more.
	podSecurity                     string
	podSecurityWhy, podSecurityMore []string
	warnings                        []string
	// crdsDir: the chart has a crds/ directory (Helm installs it and never upgrades it).
	crdsDir bool
}

// sourcedRule is a rule of the kind's role and where it came from.
type sourcedRule struct {
	rule rbacv1.PolicyRule
	why  string
}

// addSourced records a reason for key in m.
func addSourced[K comparable](m map[K]*sourced, key K, what string, byDefault bool) {
	if m[key] == nil {
		m[key] = &sourced{}
	}
	m[key].add(what, byDefault)
}

// sortedKeys are a map's keys in order.
func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
