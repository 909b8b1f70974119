package watches

import (
	"regexp"
	"text/template"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/rudder-operator/rudder/internal/health"
	"github.com/rudder-operator/rudder/internal/helm"
	"github.com/rudder-operator/rudder/internal/postrender"
)

// The schema of watches.yaml: a Watch and every section of it, as its YAML reads them (like
// the API types of a kubebuilder project, in one place). What a watch answers from them is in
// the files of each section, how a watches file is loaded and checked in load.go.

// completing and checking are a Watch as Load completes it (what the entry derives: its kind,
// chart path, selector, layers, health expressions and templates) and checks it (every
// section, naming the field in its error): complete's steps, each in the file of the section
// it reads. Nothing calls them once the watch is loaded.
type (
	completing struct{ w *Watch }
	checking   struct{ w *Watch }
)

// Policies are a watch's day-2 policies as its passes ask for them, each with its default:
// how its releases are installed, upgraded, applied, waited for, tested, remedied, kept and
// checked for drift (the methods beside each section's checks).
type Policies struct{ w *Watch }

// Policies are the watch's day-2 policies, with their defaults.
func (w *Watch) Policies() Policies { return Policies{w} }

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
	// DependsOn lets the watch's CRs wait for other CRs rudder serves: a CR is installed or
	// upgraded only once each CR it depends on is ready (see DependsOn).
	DependsOn *DependsOn `json:"dependsOn,omitempty"`
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
	deps           *dependencies    // DependsOn, resolved by Parse; nil: none
	layersDigest   string           // post's digest
}

// Limits is a watch's limits field: the bounds of each release, which keep one CR from
// flooding its namespace or holding rudder's workers. Unset fields keep helm.Limits' defaults.
type Limits struct {
	// MaxObjects is the most objects one release renders, manifest and hooks together
	// (default 1000).
	MaxObjects int `json:"maxObjects,omitempty"`
	// MaxManifestBytes is the largest rendered manifest, and the largest sum of the hooks'
	// manifests, as a quantity such as 4Mi (default 4Mi).
	MaxManifestBytes *resource.Quantity `json:"maxManifestBytes,omitempty"`
	// ActionTimeout is how long one Helm action may wait for its hooks (default 5m, Helm's).
	ActionTimeout *metav1.Duration `json:"actionTimeout,omitempty"`
	// RenderTimeout and RenderMemory bound one render of the chart, which runs in a worker
	// process (default 30s and 256Mi): a template that loops, recurses or allocates without
	// end fails its CR, and nothing else.
	RenderTimeout *metav1.Duration   `json:"renderTimeout,omitempty"`
	RenderMemory  *resource.Quantity `json:"renderMemory,omitempty"`
	// MaxActionsPerNamespace is how many of the kind's workers the CRs of one namespace may
	// hold in Helm actions at once (default: the workers, maxConcurrentReconciles); the other
	// CRs of that namespace wait their turn without holding a worker.
	MaxActionsPerNamespace int `json:"maxActionsPerNamespace,omitempty"`
	// MaxLookups is the most lookups one render may make (default 100).
	MaxLookups int `json:"maxLookups,omitempty"`
}

// CRDs is a watch's crds field: the policy for the chart's crds/ directory, which Helm
// installs with the first revision and never upgrades, in Flux's words (helm.CRDsSkip,
// CRDsCreate, CRDsCreateReplace). Either policy applies only where allowClusterScoped names
// CustomResourceDefinition.
type CRDs struct {
	// Install is Create (default, Helm's) or Skip.
	Install helm.CRDMode `json:"install,omitempty"`
	// Upgrade is Skip (default, Helm's), Create or CreateReplace.
	Upgrade helm.CRDMode `json:"upgrade,omitempty"`
}

// DriftDetection is a watch's driftDetection field.
type DriftDetection struct {
	// Mode is enabled (default), warn or disabled.
	Mode string `json:"mode,omitempty"`
	// Ignore lists fields that are neither restored nor reported, on the objects they target.
	Ignore []DriftIgnore `json:"ignore,omitempty"`
}

// DriftIgnore is one rule of driftDetection.ignore.
type DriftIgnore struct {
	// Paths are JSON pointers (RFC 6901) into the objects, such as /spec/replicas.
	Paths []string `json:"paths"`
	// Target selects the objects the rule applies to (unset: every object of the release).
	Target *DriftTarget `json:"target,omitempty"`
}

// DriftTarget selects objects of a release with the selector a post-renderer's patch targets
// with (Flux uses one selector type for both): every field that is set must match; name and
// namespace are regular expressions of the whole value.
type DriftTarget struct {
	postrender.Selector

	// Set by Load.
	name, namespace     *regexp.Regexp
	labels, annotations labels.Selector
}

// Install is a watch's install field.
type Install struct {
	// ServerSideApply: new releases are applied server-side, as rudder's field manager
	// (default false: client-side, as Helm 3 applied).
	ServerSideApply bool `json:"serverSideApply,omitempty"`
	// TakeOwnership: an object the release renders that exists outside any release is taken
	// into the release when it claims the CR (annotation rudder.dev/values-for naming it);
	// any other existing object is refused as without it (Flux's takeOwnership, on proof).
	TakeOwnership bool `json:"takeOwnership,omitempty"`
}

// Wait is a watch's wait field: what an install, upgrade or rollback waits for besides its
// hooks (helm.WaitPolicy).
type Wait struct {
	// Enable: the action waits until the release's objects are ready (kstatus), failing at
	// limits.actionTimeout.
	Enable bool `json:"enable,omitempty"`
	// Jobs: it waits for the release's Jobs to complete, too.
	Jobs bool `json:"jobs,omitempty"`
	// Kinds, when set, are the only kinds it waits for: Kind, or Kind.group.
	Kinds []string `json:"kinds,omitempty"`
}

// Upgrade is a watch's upgrade field.
type Upgrade struct {
	// Force replaces (deletes and creates) the objects whose update the API server refuses
	// because it changes an immutable field, within the one upgrade: one new revision.
	Force bool `json:"force,omitempty"`
	// ServerSideApply is auto (default: the method each release recorded), true (client-side
	// releases move to server-side apply on their next upgrade) or false.
	ServerSideApply ApplyMode `json:"serverSideApply,omitempty"`
	// ForceConflicts: a server-side apply (an upgrade, a rollback) takes the fields another
	// manager holds; else it fails with the conflict.
	ForceConflicts bool `json:"forceConflicts,omitempty"`
}

// ApplyMode is upgrade.serverSideApply: auto, true or false, as a string or a YAML boolean.
type ApplyMode string

// Remediation is a watch's remediation field.
type Remediation struct {
	// Retries is how often a failed install or upgrade of the same (chart, values) is tried
	// again, with exponential back-off, before it is held back and Stalled (default 0).
	Retries int `json:"retries,omitempty"`
}

// Rollout is a watch's rollout field: how a chart edit reaches the watch's CRs. Without it,
// every CR moves to a new chart at once. With it, CRs move in waves, each once every CR of the
// waves before is Ready on the new chart (and Tested, where the watch tests) and has stayed so
// for settle (see controllers/rollout.go).
type Rollout struct {
	// Waves are the waves' cumulative sizes, in order; a wave that leaves CRs behind is
	// followed by one that moves the rest.
	Waves []Wave `json:"waves"`
	// Settle is how long every CR of the waves so far stays Ready before the next wave
	// starts (default 0).
	Settle *metav1.Duration `json:"settle,omitempty"`
	// HealthTimeout is how long a CR of a wave has to be Ready on the new chart; past it, the
	// CR counts as failed (default 5m).
	HealthTimeout *metav1.Duration `json:"healthTimeout,omitempty"`
	// MaxFailures is how many CRs may fail before the rollout halts (default 0: the first
	// failure halts it).
	MaxFailures int `json:"maxFailures,omitempty"`
	// OnHalt is what a halt does: hold (default: the moved CRs stay where they are) or
	// rollback (each moved CR is rolled back, through its Helm history, to its newest
	// revision of an earlier chart).
	OnHalt string `json:"onHalt,omitempty"`
	// Paused starts every rollout paused: it waits for its Rollout's rudder.dev/paused
	// annotation to be set to "false".
	Paused bool `json:"paused,omitempty"`
}

// Wave is one wave of a rollout: exactly one of Count, Percent and Selector.
type Wave struct {
	// Count: the waves so far move this many CRs in all.
	Count int `json:"count,omitempty"`
	// Percent: the waves so far move this share of the CRs in all (rounded up).
	Percent int `json:"percent,omitempty"`
	// Selector (first wave only: a canary) moves the CRs it selects.
	Selector *metav1.LabelSelector `json:"selector,omitempty"`

	selector labels.Selector // set by checkRollout
}

// Test is a watch's test field: rudder runs the chart's test hooks (helm.sh/hook: test, what
// `helm test` runs) after each install or upgrade that succeeds, once per revision.
type Test struct {
	// Enable runs the tests.
	Enable bool `json:"enable"`
	// Timeout bounds one run of the tests (default, and at most: limits.actionTimeout).
	Timeout *metav1.Duration `json:"timeout,omitempty"`
	// OnFailure is report (default) or rollback: what a failed run after an install or upgrade
	// does. A periodic run (Interval) only reports.
	OnFailure string `json:"onFailure,omitempty"`
	// Interval, when set, runs the tests again on a deployed release whose revision is
	// unchanged, that long after the last run ended, as a health signal: a failure sets
	// Tested=False (the failed test Pod and its log's tail), an Event and a metric, and makes
	// no revision and no rollback. At least MinTestInterval.
	Interval *metav1.Duration `json:"interval,omitempty"`
	// ShowLogs also puts the tail of a failed test Pod's log in the Tested condition, which
	// whoever reads the CR sees; without it the tail is in the Event only (whoever reads the
	// namespace's Events), and the condition names the Pod and how it ended.
	ShowLogs bool `json:"showLogs,omitempty"`
}

// ValuesFrom is one source of a watch's values: a key of a Secret or a ConfigMap in each CR's
// own namespace (Flux's valuesFrom). The sources are merged in order, and the CR's spec goes
// on top: the spec wins.
type ValuesFrom struct {
	// Kind is Secret or ConfigMap.
	Kind string `json:"kind"`
	// Name is a template over the CR, like overrideValues (e.g. "{{ .metadata.name }}-db").
	Name string `json:"name"`
	// ValuesKey is the key holding the values (default values.yaml).
	ValuesKey string `json:"valuesKey,omitempty"`
	// TargetPath, when set, is the dotted path (as for helm --set) that receives the key's
	// whole content as a string; otherwise the content is a YAML map of values.
	TargetPath string `json:"targetPath,omitempty"`
	// Optional: a missing object or key is no error.
	Optional bool `json:"optional,omitempty"`

	nameTpl *template.Template
}

// Source is a ValuesFrom entry made for one CR: which object, in the CR's namespace.
type Source struct {
	Kind, Namespace, Name, Key, TargetPath string
	Optional                               bool
	// Field names the entry in messages: valuesFrom[i].
	Field string
	// For, when set, is the CR as the source must name it in its AnnotationValuesFor: the
	// source's name comes from the CR, which its author chooses, so the source is read only
	// when it says it is meant for that CR. A fixed name is the platform team's choice, and
	// needs no such claim.
	For string
}
