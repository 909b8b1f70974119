package watches

import (
	"cmp"
	"fmt"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/rudder-operator/rudder/internal/guard"
	"github.com/rudder-operator/rudder/internal/helm"
)

// The declaration of every watches.yaml key: Fields for an entry's own keys, LimitFields for
// the keys of its limits. The Watch and Limits structs hold the values (a test holds their JSON
// keys to these tables, both ways), the defaults are the constants the code that applies them
// uses (helm.Default*), LimitFields' checks are what Load and `rudder lint` report, and the
// two tables of docs/reference.md are generated from them (`make manifests`; a test fails when
// the reference says otherwise). How to add a field or a limit: see doc.go.

// Field is one key of a watches.yaml entry.
type Field struct {
	// Key is the JSON key.
	Key string
	// Default is what an entry without the key gets, as the reference shows it ("" for none).
	Default string
	// Doc is the reference's line for it (Markdown).
	Doc string
}

// Fields are the keys of a watches.yaml entry, in the reference's order.
var Fields = []Field{
	{"group", "the core group", "the CRs' API group, a DNS subdomain"},
	{"version", "required", "the CRs' version, a DNS label such as `v1alpha1`"},
	{"kind", "required", "the CRs' kind, CamelCase"},
	{"chart", "required", "the chart directory, relative to watches.yaml or absolute"},
	{"overrideValues", "",
		"map of dotted keys to strings set on top of the spec; `$ENV`/`${ENV}` expanded at load, then a Go template with sprig and the CR as " +
			"`.`, as rudder caches it (without `managedFields` and kubectl's last-applied-configuration annotation)"},
	{"selector", "every CR", "a label selector: the watch serves only the CRs it matches"},
	{"reconcilePeriod", "the manager's", "how often every CR is checked again (jittered, in steps of a twelfth of it; at least 1s)"},
	{"maxConcurrentReconciles", "the manager's", "the kind's workers"},
	{"watchDependentResources", "true", "watch the objects of every release, so that drift is seen as it happens"},
	{"releaseName", "the CR's name", "a template over the CR naming its release"},
	{"maxHistory", strconv.Itoa(DefaultMaxHistory), "revisions Helm keeps per release (0: all)"},
	{"rollbackOnFailure", "true", "roll a failed upgrade back to the last deployed revision"},
	{"allowedNamespaces", "", "namespaces besides the CR's own that rendered objects may live in (`*`: any)"},
	{"allowClusterScoped", "",
		"cluster-scoped kinds a chart may render (`Kind` or `Kind.group`; `CustomResourceDefinition` lets a chart's `crds/` be installed)"},
	{"allowAggregationLabels", "", "aggregation labels a Role or ClusterRole of the chart may carry or aggregate by"},
	{"allowReads", "", "what a release may read that it did not make, by a lookup or by naming it (a Pod's Secrets, ConfigMaps and claims, " +
		"an HPA's target, an Ingress's Services): `Kind`, `Kind.group`, `Kind/name` or `Kind.group/name`; `<release>` in a name stands for the " +
		"release's name. What the chart's defaults name after the release needs no entry: the defaults rendered for the release's own name " +
		"decide it"},
	{"allowServiceAccounts", "",
		"ServiceAccounts of the CR's namespace, besides `default` and the release's own, that its Pods may run as, a token Secret may name and " +
			"its bindings may bind (`*`: any); `<release>` in a name stands for the release's name, and for what the chart's defaults " +
			"name after it"},
	{"allowSubjects", "", "other binding subjects a release may bind: `{kind: User|Group|ServiceAccount, name, namespace}`"},
	{"allowRoles", "", "existing roles a release's bindings may bind, besides those it makes: `ClusterRole/name` or `Role/name`; " +
		"`<release>` in a name stands for the release's name, and for what the chart's defaults name after it"},
	{"allowRules", "", "what the Roles and ClusterRoles a release makes may grant: RBAC rules (`apiGroups`, `resources`, `resourceNames`, " +
		"`nonResourceURLs`, `verbs`) that must cover each of theirs"},
	{"podSecurity", guard.DefaultPodSecurity,
		"the Pod Security Standards level (`privileged`, `baseline`, `restricted`) every pod template of a release is held to, hooks included"},
	{"allowExternalIPs", "false", "let a release's Services set `externalIPs` (which take that address's traffic cluster-wide)"},
	{"checkValues", "", "values every CR of the kind gives at least: the chart is linted with them on top of its defaults when it loads, so " +
		"that a chart whose schema requires a value without a default loads (`rudder scaffold` writes what it was given with `--set` and " +
		"`--values`; watches sharing a chart share theirs, merged in order)"},
	{"postRenderers", "",
		"`kustomize: {patches: [{patch, target: {group, version, kind, name, namespace, labelSelector, annotationSelector}}], images: [{name, " +
			"newName, newTag, digest}]}` and `hooks` ([public charts](charts.md#customizing-a-public-chart))"},
	{"commonMetadata", "", "`labels` and `annotations` put on every object, hooks included " +
		"([public charts](charts.md#customizing-a-public-chart))"},
	{"healthChecks", "", "`apiVersion`, `kind`, `current`, `inProgress`, `failed`: CEL that judges the kinds kstatus cannot " +
		"([public charts](charts.md#customizing-a-public-chart))"},
	{"limits", "", "the bounds of each release, below ([security model](security.md#security-model))"},
	{"test", "", "`enable`, `timeout`, `onFailure: report|rollback`, `interval`, `showLogs`: the chart's tests after each install and " +
		"upgrade, and again every `interval` on an unchanged release ([concepts](concepts.md#how-it-works))"},
	{"valuesFrom", "", "`kind`, `name`, `valuesKey`, `targetPath`, `optional`: values from the CR's Secrets and ConfigMaps " +
		"([concepts](concepts.md#how-it-works))"},
	{"crds", "", "`install: Create|Skip`, `upgrade: Skip|Create|CreateReplace` ([day-2](day2.md#policies))"},
	{"driftDetection", "", "`mode: enabled|warn|disabled`, `ignore` ([day-2](day2.md#policies))"},
	{"install", "", "`serverSideApply`: new releases are applied server-side, as field manager `helm` ([Helm 4 and 3](helm.md)); " +
		"`takeOwnership`: an existing object outside any release that claims the CR (`rudder.dev/values-for`) is taken into its release " +
		"([moving to rudder](migration.md))"},
	{"wait", "hooks only",
		"`enable`, `jobs`, `kinds`: an install, upgrade or rollback waits until the release's objects are ready ([day-2](day2.md#policies))"},
	{"upgrade", "", "`force`: replace the objects whose update changes an immutable field ([day-2](day2.md#policies)); `serverSideApply: " +
		"auto|true|false`, `forceConflicts` ([Helm 4 and 3](helm.md))"},
	{"remediation", "", "`retries`: a failed install or upgrade is tried again with back-off ([day-2](day2.md#policies))"},
	{"rollout", "every CR at once",
		"`waves: [{count|percent|selector}]`, `settle`, `healthTimeout` (5m), `maxFailures` (0), `onHalt: hold|rollback`, `paused`: a chart " +
			"edit reaches the CRs in health-gated waves ([rollouts](day2.md#rolling-out-a-chart-edit))"},
	{"dependsOn", "", "`kinds: [{kind, readyExpr}]`, `allowNamespaces`, `defaults`: the watched kinds a CR may wait for, named in its " +
		"`rudder.dev/depends-on` annotation; it is installed or upgraded once each is ready ([ordering](day2.md#ordering-between-crs))"},
	{"serviceAccountName", "rudder's `--default-service-account`",
		"the ServiceAccount of the CR's namespace that every request for its release impersonates ([multi-tenancy](security.md#multi-tenancy))"},
}

// LimitField is one key of a watch's limits.
type LimitField struct {
	// Key is the JSON key under limits.
	Key string
	// Default is what a watch without it gets, as the reference shows it; it is made of the
	// constant the code applies.
	Default string
	// Doc is the reference's line for what it bounds (Markdown).
	Doc string
	// check says what is wrong with the value l holds for it (nil: nothing, or unset).
	check func(l *Limits) error
}

// MinRenderMemory is the least renderMemory a watch may give: what a render worker needs to
// start and render a small chart.
const MinRenderMemory = 64 << 20

// LimitFields are the keys of a watch's limits, in the reference's order.
var LimitFields = []LimitField{
	{helm.LimitObjects, strconv.Itoa(helm.DefaultMaxObjects), "objects one release renders, manifest and hooks together",
		func(l *Limits) error { return notNegative(l.MaxObjects) }},
	{helm.LimitManifestBytes, quantity(helm.DefaultMaxManifestBytes), "the rendered manifest, and the hooks' manifests together",
		func(l *Limits) error { return positiveQuantity(l.MaxManifestBytes) }},
	{helm.LimitRenderTimeout, duration(helm.DefaultRenderTimeout), "one render of the chart",
		func(l *Limits) error { return positiveDuration(l.RenderTimeout) }},
	{helm.LimitRenderMemory, quantity(helm.DefaultRenderMemory),
		"a render worker's memory while it renders (the stack is held to 64 MiB); the renders running at once share rudder's " +
			"`--render-memory-budget`",
		func(l *Limits) error {
			if l.RenderMemory != nil && l.RenderMemory.Value() < MinRenderMemory {
				return fmt.Errorf("%s is below the %s a render worker needs", l.RenderMemory, quantity(MinRenderMemory))
			}
			return nil
		}},
	{guard.LimitLookups, strconv.Itoa(guard.DefaultMaxLookups),
		"lookups one render makes (public charts make a few: their own Secrets, a PVC, their CRDs)",
		func(l *Limits) error { return notNegative(l.MaxLookups) }},
	{helm.LimitActionTimeout, duration(helm.DefaultActionTimeout) + " (Helm's `--timeout`)",
		"how long one Helm action waits for its hooks, uninstall included",
		func(l *Limits) error { return positiveDuration(l.ActionTimeout) }},
	{"maxActionsPerNamespace", "the kind's workers",
		"Helm actions the CRs of one namespace run at once; the others wait their turn (`Reconciling=True`, reason `Queued`) holding no worker",
		func(l *Limits) error { return notNegative(l.MaxActionsPerNamespace) }},
}

// check validates l against LimitFields.
func (l *Limits) check() error {
	if l == nil {
		return nil
	}
	for _, f := range LimitFields {
		if err := f.check(l); err != nil {
			return fmt.Errorf("limits.%s: %w", f.Key, err)
		}
	}
	return nil
}

func notNegative(n int) error {
	if n < 0 {
		return fmt.Errorf("%d must not be negative", n)
	}
	return nil
}

func positiveQuantity(q *resource.Quantity) error {
	if q != nil && q.Sign() <= 0 {
		return fmt.Errorf("%s must be positive", q)
	}
	return nil
}

func positiveDuration(d *metav1.Duration) error {
	if d != nil && d.Duration <= 0 {
		return fmt.Errorf("%s must be positive", d.Duration)
	}
	return nil
}

// quantity spells bytes as watches.yaml would (4Mi).
func quantity(bytes int64) string { return resource.NewQuantity(bytes, resource.BinarySI).String() }

// duration spells d as watches.yaml would, without zero units (5m, 30s).
func duration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// MarkdownFields is the reference's table of an entry's keys.
func MarkdownFields() string {
	rows := make([][3]string, len(Fields))
	for i, f := range Fields {
		rows[i] = [3]string{f.Key, f.Default, f.Doc}
	}
	return markdownTable([3]string{"field", "default", "what it is"}, rows)
}

// MarkdownLimits is the reference's table of the limits.
func MarkdownLimits() string {
	rows := make([][3]string, len(LimitFields))
	for i, f := range LimitFields {
		rows[i] = [3]string{f.Key, f.Default, f.Doc}
	}
	return markdownTable([3]string{"limit", "default", "bounds"}, rows)
}

// markdownTable is a GitHub Markdown table of keys, defaults and docs: a cell's "|" is escaped
// (in code spans too), an empty default is a dash.
func markdownTable(head [3]string, rows [][3]string) string {
	cell := strings.NewReplacer("|", `\|`).Replace
	var b strings.Builder
	fmt.Fprintf(&b, "| %s | %s | %s |\n|---|---|---|\n", head[0], head[1], head[2])
	for _, r := range rows {
		fmt.Fprintf(&b, "| `%s` | %s | %s |\n", r[0], cell(cmp.Or(r[1], "—")), cell(r[2]))
	}
	return b.String()
}
