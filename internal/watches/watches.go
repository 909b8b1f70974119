package watches

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"text/template"
	"time"

	"github.com/Masterminds/sprig/v3"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/yaml"

	"github.com/rudder-operator/rudder/internal/health"
	"github.com/rudder-operator/rudder/internal/postrender"
)

// Defaults applied to fields a watch leaves out.
const (
	DefaultMaxHistory = 10
)

// Watch is one entry of watches.yaml.
type Watch struct {
	Group   string `json:"group"`
	Version string `json:"version"`
	Kind    string `json:"kind"`
	// Chart is the chart directory, relative to the watches file or absolute.
	Chart string `json:"chart"`

	// OverrideValues are set on top of the CR's spec (dotted paths, like helm --set keys).
	// Values have $ENV / ${ENV} expanded at load time, then are rendered per CR as a Go
	// template with sprig functions and the CR (as a map) as ".".
	OverrideValues map[string]string `json:"overrideValues,omitempty"`
	// Selector limits the watch to CRs whose labels match.
	Selector *metav1.LabelSelector `json:"selector,omitempty"`
	// ReconcilePeriod re-checks every CR this often (jittered); 0 uses the manager default.
	ReconcilePeriod *metav1.Duration `json:"reconcilePeriod,omitempty"`
	// MaxConcurrentReconciles of this kind's controller; 0 uses the manager default.
	MaxConcurrentReconciles int `json:"maxConcurrentReconciles,omitempty"`
	// WatchDependentResources watches the objects of every release and corrects drift
	// (default true).
	WatchDependentResources *bool `json:"watchDependentResources,omitempty"`
	// ReleaseName is a sprig template over the CR; default: the CR's name.
	ReleaseName string `json:"releaseName,omitempty"`
	// MaxHistory caps the revisions Helm keeps per release (default 10).
	MaxHistory *int `json:"maxHistory,omitempty"`
	// RollbackOnFailure rolls a failed upgrade back to the last deployed revision (default true).
	RollbackOnFailure *bool `json:"rollbackOnFailure,omitempty"`
	// AllowedNamespaces are namespaces, besides the CR's own, that rendered objects may live in.
	AllowedNamespaces []string `json:"allowedNamespaces,omitempty"`
	// AllowClusterScoped lists the kinds ("Kind" or "Kind.group") of cluster-scoped objects a
	// chart may render.
	AllowClusterScoped []string `json:"allowClusterScoped,omitempty"`
	// AllowAggregationLabels names the aggregation labels (rbac.authorization.k8s.io/aggregate-to-*
	// and the like) a Role or ClusterRole the chart renders may carry or aggregate by; without
	// it such a role is refused, since it would add rules to roles others hold.
	AllowAggregationLabels []string `json:"allowAggregationLabels,omitempty"`
	// AllowReads, AllowServiceAccounts and AllowSubjects widen what a release may read and
	// which identities it may hand out (see internal/guard, identity.go).
	AllowReads           []string         `json:"allowReads,omitempty"`
	AllowServiceAccounts []string         `json:"allowServiceAccounts,omitempty"`
	AllowSubjects        []rbacv1.Subject `json:"allowSubjects,omitempty"`
	// AllowRoles and AllowRules bound what a release grants: the existing roles its bindings
	// may bind, and the rules its own roles may hold (see internal/guard, grants.go).
	AllowRoles []string            `json:"allowRoles,omitempty"`
	AllowRules []rbacv1.PolicyRule `json:"allowRules,omitempty"`
	// PodSecurity is the Pod Security Standards level its pod templates are held to:
	// privileged, baseline (the default) or restricted (see internal/guard, podsecurity.go).
	PodSecurity string `json:"podSecurity,omitempty"`
	// AllowExternalIPs lets its Services set externalIPs.
	AllowExternalIPs bool `json:"allowExternalIPs,omitempty"`
	// CheckValues are values every CR of the kind gives at least: the chart is linted with
	// them on top of its defaults when it loads, so that a chart whose schema requires a value
	// that has no default loads (scaffold writes what it was given with --set and --values).
	CheckValues map[string]any `json:"checkValues,omitempty"`
	// PostRenderers and CommonMetadata are what the platform layers on the chart's output
	// (see layers.go): kustomize patches and image overrides, labels and annotations.
	PostRenderers  []postrender.PostRenderer `json:"postRenderers,omitempty"`
	CommonMetadata *postrender.Metadata      `json:"commonMetadata,omitempty"`
	// HealthChecks judge the objects of kinds kstatus cannot (CEL, see health.go); they are
	// evaluated instead of kstatus for those kinds.
	HealthChecks []health.Check `json:"healthChecks,omitempty"`
	// Limits bound each release of the watch (see helm.Limits for the defaults).
	Limits *Limits `json:"limits,omitempty"`
	// Test runs the chart's test hooks after each install or upgrade (see Test).
	Test *Test `json:"test,omitempty"`
	// ValuesFrom are Secrets and ConfigMaps of each CR's namespace whose values go under the
	// spec's (see ValuesFrom).
	ValuesFrom []ValuesFrom `json:"valuesFrom,omitempty"`
	// CRDs, DriftDetection, Install, Wait, Upgrade and Remediation are the day-2 policies
	// (see policy.go).
	CRDs           *CRDs           `json:"crds,omitempty"`
	Install        *Install        `json:"install,omitempty"`
	Wait           *Wait           `json:"wait,omitempty"`
	DriftDetection *DriftDetection `json:"driftDetection,omitempty"`
	Upgrade        *Upgrade        `json:"upgrade,omitempty"`
	Remediation    *Remediation    `json:"remediation,omitempty"`
	// Rollout moves a chart edit to the CRs in health-gated waves (see rollout.go); nil: all
	// at once.
	Rollout *Rollout `json:"rollout,omitempty"`
	// ServiceAccountName, when set, is the ServiceAccount of each CR's own namespace that every
	// request made for the CR's release impersonates (Flux's multi-tenancy model); it wins over
	// rudder's --default-service-account. Unset with no default: rudder's own identity.
	ServiceAccountName string `json:"serviceAccountName,omitempty"`

	// Set by Load.
	gvk            schema.GroupVersionKind
	chartPath      string
	selector       labels.Selector
	overrideTmpls  map[string]*template.Template
	releaseNameTpl *template.Template
	health         *health.Checker
	post           *postrender.Spec // PostRenderers and CommonMetadata; nil: none
	layersDigest   string           // post's digest
}

// GroupVersionKind of the watched CRs.
func (w *Watch) GroupVersionKind() schema.GroupVersionKind { return w.gvk }

// ChartPath is the absolute chart directory.
func (w *Watch) ChartPath() string { return w.chartPath }

// LabelSelector is the parsed Selector (labels.Everything() when unset).
func (w *Watch) LabelSelector() labels.Selector { return w.selector }

// WatchesDependents reports whether the release's objects are watched for drift.
func (w *Watch) WatchesDependents() bool {
	return w.WatchDependentResources == nil || *w.WatchDependentResources
}

// RollsBack reports whether a failed upgrade is rolled back automatically.
func (w *Watch) RollsBack() bool { return w.RollbackOnFailure == nil || *w.RollbackOnFailure }

// HistoryLimit is the number of revisions Helm keeps (maxHistory, or its default).
func (w *Watch) HistoryLimit() int {
	if w.MaxHistory == nil {
		return DefaultMaxHistory
	}
	return *w.MaxHistory
}

// String names the watch in messages: Kind.group/version.
func (w *Watch) String() string { return w.gvk.Kind + "." + w.gvk.Group + "/" + w.gvk.Version }

var (
	dns1123  = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)
	kindName = regexp.MustCompile(`^[A-Z][A-Za-z0-9]*$`)
)

// Load reads and validates a watches file.
func Load(path string) ([]*Watch, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading watches file: %w", err)
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, err
	}
	ws, err := Parse(b, filepath.Dir(abs), os.LookupEnv)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	for i, w := range ws {
		fi, err := os.Stat(w.chartPath)
		if err != nil {
			return nil, fmt.Errorf("%s: entry %d (%s): chart: %w", path, i, w, err)
		}
		if !fi.IsDir() {
			return nil, fmt.Errorf("%s: entry %d (%s): chart: %s is not a directory", path, i, w, w.chartPath)
		}
	}
	return ws, nil
}

// Parse validates watches.yaml content. baseDir resolves relative chart paths; lookupEnv
// expands $ENV in overrideValues. It touches no files.
func Parse(data []byte, baseDir string, lookupEnv func(string) (string, bool)) ([]*Watch, error) {
	var ws []*Watch
	if err := yaml.UnmarshalStrict(data, &ws); err != nil {
		return nil, fmt.Errorf("parsing watches: %w", err)
	}
	if len(ws) == 0 {
		return nil, errors.New("no watches: the file lists no group/version/kind")
	}
	seen := map[schema.GroupVersionKind]int{}
	for i, w := range ws {
		if w == nil {
			return nil, fmt.Errorf("entry %d: empty entry", i)
		}
		if err := w.complete(baseDir, lookupEnv); err != nil {
			return nil, fmt.Errorf("entry %d (%s/%s %s): %w", i, w.Group, w.Version, w.Kind, err)
		}
		if j, dup := seen[w.gvk]; dup {
			return nil, fmt.Errorf("entry %d (%s): duplicate of entry %d: a kind can be watched once", i, w, j)
		}
		seen[w.gvk] = i
	}
	return ws, nil
}

func (w *Watch) complete(baseDir string, lookupEnv func(string) (string, bool)) error {
	for _, step := range []func() error{
		w.completeGVK,
		func() error { return w.completeChart(baseDir) },
		w.completeSelector,
		w.checkLimits,
		w.checkTenancy,
		w.Limits.check,
		w.checkTest,
		w.checkValuesFrom,
		w.checkPolicies,
		w.completeLayers,
		w.compileHealth,
		func() error { return w.completeTemplates(lookupEnv) },
	} {
		if err := step(); err != nil {
			return err
		}
	}
	return nil
}

func (w *Watch) completeGVK() error {
	if w.Group != "" {
		if errs := validation.IsDNS1123Subdomain(w.Group); len(errs) > 0 {
			return fmt.Errorf("group: %s", strings.Join(errs, "; "))
		}
	}
	if !dns1123.MatchString(w.Version) || len(w.Version) > 63 {
		return fmt.Errorf("version: %q must be a DNS label such as v1alpha1", w.Version)
	}
	if !kindName.MatchString(w.Kind) {
		return fmt.Errorf("kind: %q must be a CamelCase name such as MyApp", w.Kind)
	}
	w.gvk = schema.GroupVersionKind{Group: w.Group, Version: w.Version, Kind: w.Kind}
	return nil
}

func (w *Watch) completeChart(baseDir string) error {
	if w.Chart == "" {
		return errors.New("chart: required")
	}
	w.chartPath = w.Chart
	if !filepath.IsAbs(w.chartPath) {
		w.chartPath = filepath.Join(baseDir, w.chartPath)
	}
	w.chartPath = filepath.Clean(w.chartPath)
	return nil
}

func (w *Watch) completeSelector() error {
	w.selector = labels.Everything()
	if w.Selector != nil {
		s, err := metav1.LabelSelectorAsSelector(w.Selector)
		if err != nil {
			return fmt.Errorf("selector: %w", err)
		}
		w.selector = s
	}
	return nil
}

func (w *Watch) checkLimits() error {
	if w.ReconcilePeriod != nil && w.ReconcilePeriod.Duration < 0 {
		return fmt.Errorf("reconcilePeriod: %s must not be negative", w.ReconcilePeriod.Duration)
	}
	if w.ReconcilePeriod != nil && w.ReconcilePeriod.Duration > 0 && w.ReconcilePeriod.Duration < time.Second {
		return fmt.Errorf("reconcilePeriod: %s is below the 1s minimum", w.ReconcilePeriod.Duration)
	}
	if w.MaxConcurrentReconciles < 0 {
		return fmt.Errorf("maxConcurrentReconciles: %d must not be negative", w.MaxConcurrentReconciles)
	}
	if w.MaxHistory != nil && *w.MaxHistory < 0 {
		return fmt.Errorf("maxHistory: %d must not be negative (0 keeps every revision)", *w.MaxHistory)
	}
	return nil
}

func (w *Watch) checkTenancy() error {
	for _, ns := range w.AllowedNamespaces {
		if errs := validation.IsDNS1123Label(ns); len(errs) > 0 && ns != "*" {
			return fmt.Errorf("allowedNamespaces: %q: %s", ns, strings.Join(errs, "; "))
		}
	}
	for _, k := range w.AllowClusterScoped {
		if k == "" {
			return errors.New("allowClusterScoped: empty kind")
		}
	}
	if w.ServiceAccountName != "" {
		if errs := validation.IsDNS1123Subdomain(w.ServiceAccountName); len(errs) > 0 {
			return fmt.Errorf("serviceAccountName: %q: %s", w.ServiceAccountName, strings.Join(errs, "; "))
		}
	}
	return w.checkIdentities()
}

func (w *Watch) completeTemplates(lookupEnv func(string) (string, bool)) error {
	w.overrideTmpls = map[string]*template.Template{}
	for key, raw := range w.OverrideValues {
		if key == "" || strings.HasPrefix(key, ".") || strings.HasSuffix(key, ".") || strings.Contains(key, "..") {
			return fmt.Errorf("overrideValues: key %q is not a dotted path such as image.tag", key)
		}
		expanded := os.Expand(raw, func(name string) string {
			v, _ := lookupEnv(name)
			return v
		})
		t, err := newTemplate("overrideValues."+key, expanded)
		if err != nil {
			return fmt.Errorf("overrideValues.%s: %w", key, err)
		}
		w.overrideTmpls[key] = t
	}
	if w.ReleaseName != "" {
		t, err := newTemplate("releaseName", w.ReleaseName)
		if err != nil {
			return fmt.Errorf("releaseName: %w", err)
		}
		w.releaseNameTpl = t
	}
	return nil
}

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

// renderReleaseName renders the release name template for one CR; "" when the watch has none.
func (w *Watch) renderReleaseName(cr map[string]any) (string, error) {
	if w.releaseNameTpl == nil {
		return "", nil
	}
	var buf bytes.Buffer
	if err := w.releaseNameTpl.Execute(&buf, cr); err != nil {
		return "", fmt.Errorf("releaseName: %w", err)
	}
	return strings.TrimSpace(strings.ReplaceAll(buf.String(), "<no value>", "")), nil
}
