package cli

import (
	"cmp"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"

	"github.com/rudder-operator/rudder/internal/guard"
	"github.com/rudder-operator/rudder/internal/helm"
	"github.com/rudder-operator/rudder/internal/release"
)

// Scaffold renders with a release name and a namespace no chart hardcodes, so that a name
// built from the release, and a namespace that is not the release's, can be told apart.
const (
	scanRelease   = "rudderscaffold"
	scanNamespace = "rudder-scaffold-namespace"
)

// scanChart renders the chart with its defaults (under the user's values), then with each
// boolean "enabled" value switched on in turn, and collects what every manifest, hook and
// crds/ file needs.
func scanChart(ch *helm.Chart, owner schema.GroupVersionKind, user map[string]any) (*chartScan, error) {
	s := &chartScan{mapper: helm.StaticMapper(), crds: map[schema.GroupKind]kindUse{}, kinds: map[schema.GroupKind]*kindUse{},
		made: map[roleRef]bool{}, bound: map[roleRef]*sourced{}, cluster: map[string]*sourced{},
		namespaces: map[string]*sourced{}, aggregates: map[string]*sourced{},
		serviceAccounts: map[string]*sourced{}, subjects: map[string]*sourced{}, clusterNamed: map[string]*sourced{}, user: user,
		reads: map[string]*sourced{}, externalIPs: map[string]*sourced{}}
	scope := helm.Scope{Confinement: guard.Measuring(guard.Confinement{Namespace: scanNamespace, AllowedNamespaces: []string{"*"},
		AllowClusterScoped: helm.ClusterScopedKinds(), AllowAggregationLabels: []string{"*"}}), Owner: guard.Owner{GVK: owner},
		// Scaffold measures what the chart needs and writes the limits for it (see needs).
		Limits: helm.Limits{MaxObjects: scanMaxObjects, MaxManifestBytes: scanMaxBytes}}
	caps, err := helm.NewCapabilities(defaultKubeVersion())
	if err != nil {
		return nil, err
	}
	var rendered []renderedVariant
	for _, v := range valueVariants(ch, user) {
		c, err := helm.CopyChart(ch)
		if err != nil {
			return nil, err
		}
		req := &helm.Request{Scope: scope, ReleaseName: scanRelease, Chart: c, Values: v.values}
		rel, err := helm.Render(req, s.mapper, caps)
		if err != nil {
			if v.how == "defaults" {
				return nil, fmt.Errorf("rendering the chart with its defaults: %w (give the values it requires with --values or --set)", err)
			}
			fmt.Fprintf(os.Stderr, "rudder scaffold: not rendered with %s: %v\n", v.how, err)
			continue
		}
		if err := s.addIdentities(rel, v.how); err != nil {
			return nil, err
		}
		var objs []*unstructured.Unstructured
		objs = append(objs, splitObjects(rel.Manifest)...)
		for _, h := range rel.Hooks {
			objs = append(objs, splitObjects(h.Manifest)...)
		}
		rendered = append(rendered, renderedVariant{v.how, objs})
		if v.how == "defaults" {
			s.manifestBytes, s.objects = releaseSize(rel)
		}
	}
	for _, crd := range ch.CRDObjects() {
		s.crdsDir = true
		for _, o := range splitObjects(string(crd.File.Data)) {
			s.learnCRD(o)
		}
		s.addCluster(guard.CRDKind, "crds/"+crd.Filename+" (installed only where allowClusterScoped names CustomResourceDefinition)", true)
	}
	for _, r := range rendered {
		for _, o := range r.objs {
			s.learnCRD(o)
		}
	}
	for _, r := range rendered {
		for _, o := range r.objs {
			s.add(o, r.how)
		}
	}
	s.addCRDKind(ch)
	s.addLookups(ch)
	return s, nil
}

type renderedVariant struct {
	how  string
	objs []*unstructured.Unstructured
}

// learnCRD keeps the resource and scope of a kind the chart defines.
func (s *chartScan) learnCRD(o *unstructured.Unstructured) {
	if d, ok := guard.Defined(o); ok && d.Plural != "" {
		s.crds[d.GroupKind] = kindUse{gvk: d.WithVersion(""), resource: d.Plural, namespaced: d.Namespaced}
	}
}

// addCRDKind adds the CustomResourceDefinition kind itself when crds/ has any.
func (s *chartScan) addCRDKind(ch *helm.Chart) {
	if len(ch.CRDObjects()) > 0 {
		s.kind(guard.CRDKind, "crds/ (installed only where allowClusterScoped names CustomResourceDefinition)")
	}
}

// resolve tells a kind's resource and scope: from the chart's CRDs, else client-go's scheme,
// else guessed.
func (s *chartScan) resolve(gvk schema.GroupVersionKind) (kindUse, bool) {
	u := kindUse{gvk: gvk}
	if crd, own := s.crds[gvk.GroupKind()]; own {
		u.resource, u.namespaced = crd.resource, crd.namespaced
		return u, true
	}
	m, err := s.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return u, false
	}
	u.resource, u.namespaced = m.Resource.Resource, m.Scope.Name() == meta.RESTScopeNameNamespace
	u.guessed = !clientgoscheme.Scheme.Recognizes(gvk)
	return u, true
}

// kind records a kind the chart renders and returns its use.
func (s *chartScan) kind(gvk schema.GroupVersionKind, how string) *kindUse {
	u := s.kinds[gvk.GroupKind()]
	if u == nil {
		r, ok := s.resolve(gvk)
		if !ok {
			return &r
		}
		u = &r
		s.kinds[gvk.GroupKind()] = u
	}
	if len(u.how) < 3 && !slices.Contains(u.how, how) {
		u.how = append(u.how, how)
	}
	return u
}

// add records one rendered object.
func (s *chartScan) add(o *unstructured.Unstructured, how string) {
	gvk := o.GroupVersionKind()
	u := s.kind(gvk, how)
	byDefault := how == "defaults"
	what := describeObject(o) + " (" + how + ")"
	switch {
	case !u.namespaced:
		s.addCluster(gvk, what, byDefault)
		if strings.Contains(o.GetName(), scanRelease) {
			addSourced(s.clusterNamed, describeObject(o), how, byDefault)
		}
	case o.GetNamespace() != "" && o.GetNamespace() != scanNamespace:
		addSourced(s.namespaces, o.GetNamespace(), what, byDefault)
	}
	if gvk.Group != rbacv1.GroupName {
		return
	}
	switch gvk.Kind {
	case "Role", "ClusterRole":
		s.addRole(o, what, how, byDefault)
	case "RoleBinding", "ClusterRoleBinding":
		kind, _, _ := unstructured.NestedString(o.Object, "roleRef", "kind")
		name, _, _ := unstructured.NestedString(o.Object, "roleRef", "name")
		if name != "" {
			addSourced(s.bound, roleRef{kind, name}, what, byDefault)
		}
	}
}

// addRole keeps a rendered role's rules, which rudder must hold to create it, and its
// aggregation labels, which its watch must allow.
func (s *chartScan) addRole(o *unstructured.Unstructured, what, how string, byDefault bool) {
	s.made[roleRef{o.GetKind(), o.GetName()}] = true
	var role rbacv1.ClusterRole
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &role); err != nil {
		s.warnings = append(s.warnings, fmt.Sprintf("%s: its rules do not parse: %v", what, err))
		return
	}
	for _, r := range role.Rules {
		why := "rules of " + describeObject(o)
		if !byDefault {
			why += " (with " + how + ")"
		}
		if kept := fixedNames(r.ResourceNames); len(kept) != len(r.ResourceNames) {
			r.ResourceNames = nil
			why += "; resourceNames dropped: they are built from the release name"
		}
		if slices.Contains(r.Verbs, "*") || slices.Contains(r.Resources, "*") || slices.Contains(r.APIGroups, "*") ||
			slices.Contains(r.Verbs, "escalate") || slices.Contains(r.Verbs, "bind") || slices.Contains(r.Verbs, "impersonate") {
			s.warnings = append(s.warnings, fmt.Sprintf("%s has a rule %v %v %v: rudder's role holds it too, since the API server "+
				"lets rudder create a role only with rules rudder holds; review it before you apply role.yaml", what, r.APIGroups, r.Resources,
				r.Verbs))
		}
		s.copied = append(s.copied, sourcedRule{r, why})
		if byDefault {
			s.defaultRules = append(s.defaultRules, sourcedRule{r, why})
		}
	}
	for k := range o.GetLabels() {
		if strings.Contains(k, guard.AggregationMarker) {
			addSourced(s.aggregates, k, what, byDefault)
		}
	}
	if role.AggregationRule != nil {
		rule := rbacv1.PolicyRule{APIGroups: []string{rbacv1.GroupName}, Resources: []string{"clusterroles"}, Verbs: []string{"escalate"}}
		why := "create " + describeObject(o) + ", which has an aggregationRule: the API server lets only a holder of escalate on it do that"
		if fixed := fixedNames([]string{o.GetName()}); len(fixed) > 0 {
			rule.ResourceNames = fixed
		} else {
			why += "; its name is built from the release name, so on every ClusterRole " +
				"(rudder's allowRules and allowAggregationLabels still bound what a release's roles hold)"
		}
		s.escalate = append(s.escalate, sourcedRule{rule, why})
		for _, sel := range role.AggregationRule.ClusterRoleSelectors {
			for k := range sel.MatchLabels {
				addSourced(s.aggregates, k, what, byDefault)
			}
		}
	}
}

// fixedNames are the names that do not depend on the release's name.
func fixedNames(names []string) []string {
	var out []string
	for _, n := range names {
		if !strings.Contains(n, scanRelease) {
			out = append(out, n)
		}
	}
	return out
}

func (s *chartScan) addCluster(gvk schema.GroupVersionKind, what string, byDefault bool) {
	addSourced(s.cluster, guard.KindEntry(gvk.GroupKind()), what, byDefault)
}

// lookupCall is a template's `lookup "apiVersion" "Kind" ...` with literal arguments.
var lookupCall = regexp.MustCompile(`lookup\s+"([^"]*)"\s+"([A-Za-z0-9]+)"`)

// addLookups grants get and list on the kinds the templates look up: a lookup runs as rudder.
func (s *chartScan) addLookups(ch *helm.Chart) {
	seen := map[schema.GroupVersionKind]bool{}
	for c := range allCharts(ch) {
		for _, t := range c.Templates {
			for _, m := range lookupCall.FindAllStringSubmatch(string(t.Data), -1) {
				gv, err := schema.ParseGroupVersion(m[1])
				gvk := gv.WithKind(m[2])
				if err != nil || seen[gvk] {
					continue
				}
				seen[gvk] = true
				u, ok := s.resolve(gvk)
				if !ok {
					continue
				}
				s.lookups = append(s.lookups, sourcedRule{rbacv1.PolicyRule{APIGroups: []string{gvk.Group},
					Resources: []string{u.resource}, Verbs: []string{"get", "list"}}, "lookup in " + c.Name() + "/" + t.Name})
			}
		}
	}
}

// allCharts yields a chart and its dependencies, depth first.
func allCharts(ch *helm.Chart) func(func(*helm.Chart) bool) {
	return func(yield func(*helm.Chart) bool) {
		var walk func(*helm.Chart) bool
		walk = func(c *helm.Chart) bool {
			if !yield(c) {
				return false
			}
			for _, d := range c.Dependencies() {
				if !walk(d) {
					return false
				}
			}
			return true
		}
		walk(ch)
	}
}

// describeObject names a rendered object, its release-built name shown as <release>.
func describeObject(o *unstructured.Unstructured) string {
	return o.GetKind() + " " + strings.ReplaceAll(o.GetName(), scanRelease, "<release>")
}

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
		// A name built from the release's stands for every release's (guard.ChartOwnOf).
		sa = strings.ReplaceAll(sa, scanRelease, guard.ReleasePlaceholder)
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

// The bounds of scaffold's renders: far above any chart's, so that scaffold measures what a
// chart renders and writes the limits it needs instead of failing on the defaults.
const (
	scanMaxObjects = 100000
	scanMaxBytes   = 64 << 20
)
