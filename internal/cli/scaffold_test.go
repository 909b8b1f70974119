package cli

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	rbacvalidation "k8s.io/component-helpers/auth/rbac/validation"
	"sigs.k8s.io/yaml"

	"github.com/rudder-operator/rudder/internal/watches"
)

// scaffoldChart runs scaffold on a chart of config/testdata and returns its printout and the
// directory it wrote.
func scaffoldChart(t *testing.T, chart, kind string, extra ...string) (string, string, int) {
	t.Helper()
	out := t.TempDir()
	dir, err := filepath.Abs(filepath.Join("..", "..", "config", "testdata", "charts", chart))
	if err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	args := append([]string{"scaffold", "--chart", dir,
		"--group", "compat.rudder.dev", "--version", "v1", "--kind", kind, "--output", out, "--force"}, extra...)
	code := Run(context.Background(), args, Env{Stdout: &stdout, Stderr: &stderr})
	return stdout.String() + stderr.String(), out, code
}

// readRole reads the role scaffold wrote into out, and its text.
func readRole(t *testing.T, out string) (rbacv1.ClusterRole, []byte) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(out, "role.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var role rbacv1.ClusterRole
	if err := yaml.UnmarshalStrict(b, &role); err != nil {
		t.Fatalf("role.yaml: %v\n%s", err, b)
	}
	return role, b
}

// TestScaffoldDerivesRBAC: the role holds the rules of every role the chart renders (without
// the resourceNames built from the release name), bind on exactly the existing roles its
// bindings reference, and no escalate; the watches entry allows the cluster-scoped kinds and
// the aggregation label the defaults render, and loads.
func TestScaffoldDerivesRBAC(t *testing.T) {
	printed, _, code := scaffoldChart(t, "clusterwide", "Agent")
	if code != 1 || !strings.Contains(printed, "clusterName is required") || !strings.Contains(printed, "--set") {
		t.Fatalf("a required value without --set: exit %d, want 1 naming the value and --set:\n%s", code, printed)
	}
	printed, out, code := scaffoldChart(t, "clusterwide", "Agent", "--set", "clusterName=unit")
	if code != 0 {
		t.Fatalf("scaffold: %d\n%s", code, printed)
	}
	role, b := readRole(t, out)
	has := func(r rbacv1.PolicyRule) bool {
		return slices.ContainsFunc(role.Rules, func(x rbacv1.PolicyRule) bool {
			return slices.Equal(x.APIGroups, r.APIGroups) && slices.Equal(x.Resources, r.Resources) &&
				slices.Equal(x.Verbs, r.Verbs) && slices.Equal(x.ResourceNames, r.ResourceNames)
		})
	}
	for _, want := range []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"nodes", "namespaces"}, Verbs: []string{"get", "list", "watch"}},
		{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: []string{"get", "update"}},
		{APIGroups: []string{"rbac.authorization.k8s.io"}, Resources: []string{"clusterroles"}, Verbs: []string{"bind"}, ResourceNames: []string{"system:auth-delegator"}},
		{APIGroups: []string{"rbac.authorization.k8s.io"}, Resources: []string{"clusterroles"}, Verbs: []string{"bind"}, ResourceNames: []string{"view"}},
		{APIGroups: []string{"scheduling.k8s.io"}, Resources: []string{"priorityclasses"}, Verbs: allVerbs},
	} {
		if !has(want) {
			t.Errorf("role.yaml lacks %+v:\n%s", want, b)
		}
	}
	for _, r := range role.Rules {
		if slices.Contains(r.Verbs, "escalate") || slices.Contains(r.Verbs, "*") {
			t.Errorf("role.yaml grants %v", r)
		}
		if slices.Contains(r.Verbs, "bind") && len(r.ResourceNames) == 0 {
			t.Errorf("role.yaml grants bind on every role: %v", r)
		}
	}
	for _, why := range []string{"# rules of ClusterRole <release>-clusterwide\n", "resourceNames dropped", "# bind the existing ClusterRole system:auth-delegator"} {
		if !strings.Contains(string(b), why) {
			t.Errorf("role.yaml does not say %q:\n%s", why, b)
		}
	}

	ws, err := watches.Load(filepath.Join(out, "watches.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	w := ws[0]
	for _, k := range []string{"ClusterRole.rbac.authorization.k8s.io", "ClusterRoleBinding.rbac.authorization.k8s.io", "PriorityClass.scheduling.k8s.io"} {
		if !slices.Contains(w.AllowClusterScoped, k) {
			t.Errorf("watches.yaml allowClusterScoped %v lacks %s", w.AllowClusterScoped, k)
		}
	}
	if !slices.Equal(w.AllowAggregationLabels, []string{"rbac.authorization.k8s.io/aggregate-to-view"}) {
		t.Errorf("watches.yaml allowAggregationLabels %v", w.AllowAggregationLabels)
	}
	if !slices.Equal(w.AllowRoles, []string{"ClusterRole/system:auth-delegator", "ClusterRole/view"}) {
		t.Errorf("watches.yaml allowRoles %v, want the two existing roles the chart binds", w.AllowRoles)
	}
	if covered, missing := rbacvalidation.Covers(w.AllowRules, []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"nodes", "namespaces"}, Verbs: []string{"get", "list", "watch"}},
		{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: []string{"get", "update"}, ResourceNames: []string{"any-leader"}},
	}); !covered || len(w.AllowRules) != 3 {
		t.Errorf("watches.yaml allowRules %v: misses %v, or holds more than the rules of the chart's three roles", w.AllowRules, missing)
	}
	entry, _ := os.ReadFile(filepath.Join(out, "watches.yaml"))
	if !strings.Contains(string(entry), "WARNING") || !strings.Contains(printed, "outside the namespace: allowClusterScoped PriorityClass.scheduling.k8s.io") {
		t.Errorf("scaffold does not warn of what leaves the namespace:\n%s\n%s", entry, printed)
	}
	sample, _ := os.ReadFile(filepath.Join(out, "sample.yaml"))
	if !strings.Contains(string(sample), "clusterName: unit") {
		t.Errorf("the sample lacks the --set value:\n%s", sample)
	}
}

// TestScaffoldCRDsInTemplates: the kind of a CRD the chart renders gets the CRD's plural, and
// the CRD kind is allowed cluster-scoped; a kind nobody defines gets its guessed plural, said.
func TestScaffoldCRDsInTemplates(t *testing.T) {
	printed, out, code := scaffoldChart(t, "crdbundle", "Bundle", "--set", "installCRDs=true")
	if code != 0 {
		t.Fatalf("scaffold: %d\n%s", code, printed)
	}
	role, _ := os.ReadFile(filepath.Join(out, "role.yaml"))
	for _, want := range []string{"- apiGroups: [bundle.rudder.dev]\n  resources: [gears]", "resources: [customresourcedefinitions]"} {
		if !strings.Contains(string(role), want) {
			t.Errorf("role.yaml lacks %q:\n%s", want, role)
		}
	}
	if strings.Contains(printed, "Gear (bundle.rudder.dev/v1)              defaults [not built in") {
		t.Errorf("a kind the chart defines is called guessed:\n%s", printed)
	}
	ws, err := watches.Load(filepath.Join(out, "watches.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(ws[0].AllowClusterScoped, []string{"CustomResourceDefinition.apiextensions.k8s.io"}) {
		t.Errorf("allowClusterScoped %v", ws[0].AllowClusterScoped)
	}
}

// TestScaffoldWarnsOfWideRules: a rendered role with a wildcard rule is copied (rudder must
// hold it to create the role), and scaffold says so.
func TestScaffoldWarnsOfWideRules(t *testing.T) {
	printed, out, code := scaffoldChart(t, "clusterwide", "Agent", "--set", "clusterName=unit",
		"--set", "extraObjects[0].apiVersion=rbac.authorization.k8s.io/v1", "--set", "extraObjects[0].kind=ClusterRole",
		"--set", "extraObjects[0].metadata.name=everything", "--set", "extraObjects[0].rules[0].apiGroups[0]=*",
		"--set", "extraObjects[0].rules[0].resources[0]=*", "--set", "extraObjects[0].rules[0].verbs[0]=*")
	if code != 0 {
		t.Fatalf("scaffold: %d\n%s", code, printed)
	}
	if !strings.Contains(printed, "warning: ClusterRole everything (defaults) has a rule [*] [*] [*]") {
		t.Errorf("no warning of the wildcard rule:\n%s", printed)
	}
	role, _ := os.ReadFile(filepath.Join(out, "role.yaml"))
	if !strings.Contains(string(role), "# rules of ClusterRole everything\n- apiGroups: ['*']") {
		t.Errorf("role.yaml lacks the copied rule:\n%s", role)
	}
}

// A chart with crds/: the watches entry allows the CRDs and says that crds.upgrade
// CreateReplace applies a new version's on upgrade; with that line uncommented it loads.
func TestScaffoldCRDsDirectory(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{
		"chart/Chart.yaml":        "apiVersion: v2\nname: gears\nversion: 0.1.0\n",
		"chart/crds/gear.yaml":    "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata: {name: gears.example.com}\nspec: {group: example.com, names: {kind: Gear, plural: gears}, scope: Namespaced, versions: [{name: v1, served: true, storage: true}]}\n",
		"chart/templates/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n",
	})
	out := filepath.Join(dir, "out")
	var stdout, stderr bytes.Buffer
	args := []string{"scaffold", "--chart", filepath.Join(dir, "chart"), "--group", "example.com", "--version", "v1", "--kind", "GearApp", "--output", out}
	if code := Run(context.Background(), args, Env{Stdout: &stdout, Stderr: &stderr}); code != 0 {
		t.Fatalf("scaffold: %d\n%s%s", code, stdout.String(), stderr.String())
	}
	entry, err := os.ReadFile(filepath.Join(out, "watches.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(entry), "  # crds: {upgrade: CreateReplace}\n") {
		t.Fatalf("watches.yaml does not mention crds.upgrade:\n%s", entry)
	}
	on := strings.Replace(string(entry), "  # crds: {upgrade: CreateReplace}\n", "  crds: {upgrade: CreateReplace}\n", 1)
	ws, err := watches.Parse([]byte(on), dir, func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatalf("%v:\n%s", err, on)
	}
	if got := ws[0].Policies().CRDPolicy().Upgrade; got != "CreateReplace" {
		t.Fatalf("crds.upgrade %q", got)
	}
}

// TestScaffoldIdentitiesAndReleaseName: a chart whose defaults run a Deployment as a
// ServiceAccount it does not make, bind a group, and name a ClusterRole after the release gets
// a watches entry that allows the two identities and names the release after the CR's
// namespace too; the entry loads, and rudder lint warns of the same watch without that
// releaseName.
func TestScaffoldIdentitiesAndReleaseName(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{
		"chart/Chart.yaml":         "apiVersion: v2\nname: reader\nversion: 0.1.0\n",
		"chart/values.schema.json": "{}\n",
		"chart/templates/all.yaml": "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata: {name: '{{ .Release.Name }}-reader'}\nrules: []\n---\n" +
			"apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: r}\nspec: {selector: {matchLabels: {a: b}}, template: {metadata: {labels: {a: b}}, spec: {serviceAccountName: platform, containers: [{name: c, image: i}]}}}\n---\n" +
			"apiVersion: rbac.authorization.k8s.io/v1\nkind: RoleBinding\nmetadata: {name: r}\nroleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: view}\nsubjects: [{kind: Group, name: devs, apiGroup: rbac.authorization.k8s.io}]\n",
	})
	out := filepath.Join(dir, "out")
	var stdout, stderr bytes.Buffer
	args := []string{"scaffold", "--chart", filepath.Join(dir, "chart"), "--group", "example.com", "--version", "v1", "--kind", "Reader", "--output", out}
	if code := Run(context.Background(), args, Env{Stdout: &stdout, Stderr: &stderr}); code != 0 {
		t.Fatalf("scaffold: %d\n%s%s", code, stdout.String(), stderr.String())
	}
	entry, err := os.ReadFile(filepath.Join(out, "watches.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"  releaseName: '" + NamespacedReleaseName + "'\n", "  allowServiceAccounts:\n  - platform # ", "  allowSubjects:\n  - {kind: Group, name: devs} # "} {
		if !strings.Contains(string(entry), want) {
			t.Errorf("watches.yaml lacks %q:\n%s", want, entry)
		}
	}
	ws, err := watches.Parse(entry, dir, func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatalf("%v:\n%s", err, entry)
	}
	if w := ws[0]; len(w.AllowServiceAccounts) != 1 || len(w.AllowSubjects) != 1 || w.AllowSubjects[0].Kind != "Group" {
		t.Fatalf("the entry loads as %+v", w)
	}

	lint := func(entry string) string {
		file := filepath.Join(dir, "lint.yaml")
		writeFiles(t, dir, map[string]string{"lint.yaml": entry})
		var out, errOut bytes.Buffer
		Run(context.Background(), []string{"lint", "--watches-file", file}, Env{Stdout: &out, Stderr: &errOut})
		return out.String()
	}
	const plain = "- {group: example.com, version: v1, kind: Reader, chart: chart, allowClusterScoped: [ClusterRole], allowServiceAccounts: [platform], allowSubjects: [{kind: Group, name: devs}]"
	if out := lint(plain + "}\n"); !strings.Contains(out, "warning: Reader.example.com/v1: the chart names cluster-scoped objects after the release") {
		t.Errorf("lint without releaseName:\n%s", out)
	}
	if out := lint(plain + ", releaseName: '" + NamespacedReleaseName + "'}\n"); strings.Contains(out, "cluster-scoped objects after the release") {
		t.Errorf("lint with releaseName:\n%s", out)
	}
}

// TestScaffoldWritesTheLimitsAChartNeeds: a chart whose defaults render past the default
// maxManifestBytes and maxObjects (as a chart with twenty CRDs does) is scaffolded, not
// refused: its watches entry carries the limits it needs, and the sample renders under them.
func TestScaffoldWritesTheLimitsAChartNeeds(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{
		"chart/Chart.yaml":  "apiVersion: v2\nname: big\nversion: 0.1.0\n",
		"chart/values.yaml": "count: 1200\nsize: 5000000\n",
		"chart/templates/all.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: big}\ndata: {x: {{ repeat (int .Values.size) \"x\" | quote }}}\n" +
			"{{- range until (int .Values.count) }}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: c{{ . }}}\n{{- end }}\n",
	})
	out := filepath.Join(dir, "out")
	var stdout, stderr bytes.Buffer
	args := []string{"scaffold", "--chart", filepath.Join(dir, "chart"), "--group", "example.com", "--version", "v1", "--kind", "Big", "--output", out}
	if code := Run(context.Background(), args, Env{Stdout: &stdout, Stderr: &stderr}); code != 0 {
		t.Fatalf("scaffold: %d\n%s%s", code, stdout.String(), stderr.String())
	}
	entry, err := os.ReadFile(filepath.Join(out, "watches.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(entry), "  limits: {maxManifestBytes: 7Mi, maxObjects: 1600}\n") {
		t.Fatalf("watches.yaml does not carry the limits the chart needs:\n%s", entry)
	}
	var lintOut, lintErr bytes.Buffer
	if code := Run(context.Background(), []string{"lint", "--watches-file", filepath.Join(out, "watches.yaml"), filepath.Join(out, "sample.yaml")},
		Env{Stdout: &lintOut, Stderr: &lintErr}); code != 0 {
		t.Fatalf("the sample does not render under the scaffolded limits: %d\n%s%s", code, lintOut.String(), lintErr.String())
	}
}

// TestScaffoldWritesCheckValues: a chart whose schema requires a value with no default is
// scaffolded with --set; the watches entry checks the chart with that value, and rudder lint
// passes the chart with it (and fails it without).
func TestScaffoldWritesCheckValues(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{
		"chart/Chart.yaml":         "apiVersion: v2\nname: policy\nversion: 0.1.0\n",
		"chart/values.yaml":        "replicas: 1\n",
		"chart/values.schema.json": `{"type": "object", "required": ["policy"], "properties": {"policy": {"type": "string"}, "replicas": {"type": "integer"}}}`,
		"chart/templates/cm.yaml":  "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: p}\ndata: {policy: {{ .Values.policy | quote }}}\n",
	})
	out := filepath.Join(dir, "out")
	var stdout, stderr bytes.Buffer
	args := []string{"scaffold", "--chart", filepath.Join(dir, "chart"), "--group", "example.com", "--version", "v1", "--kind", "Policy", "--output", out, "--set", "policy=strict"}
	if code := Run(context.Background(), args, Env{Stdout: &stdout, Stderr: &stderr}); code != 0 {
		t.Fatalf("scaffold: %d\n%s%s", code, stdout.String(), stderr.String())
	}
	entry, err := os.ReadFile(filepath.Join(out, "watches.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(entry), `  checkValues: {"policy":"strict"}`+"\n") {
		t.Fatalf("watches.yaml does not check the chart with the value given:\n%s", entry)
	}
	lint := func(file string) (int, string) {
		var lintOut, lintErr bytes.Buffer
		code := Run(context.Background(), []string{"lint", "--watches-file", file}, Env{Stdout: &lintOut, Stderr: &lintErr})
		return code, lintOut.String()
	}
	if code, msg := lint(filepath.Join(out, "watches.yaml")); code != 0 {
		t.Errorf("lint with checkValues: %d\n%s", code, msg)
	}
	without := strings.Replace(string(entry), `  checkValues: {"policy":"strict"}`+"\n", "", 1)
	writeFiles(t, out, map[string]string{"without.yaml": without})
	if code, msg := lint(filepath.Join(out, "without.yaml")); code == 0 || !strings.Contains(msg, "policy") {
		t.Errorf("lint without checkValues: %d\n%s", code, msg)
	}
}

// TestScaffoldGrantsEscalateForAggregation: a chart that renders ClusterRoles with an
// aggregationRule (kyverno's way) gets escalate on clusterroles, which the API server asks of
// whoever creates one, and nothing else it did not get before; its watch allows the
// aggregation labels.
func TestScaffoldGrantsEscalateForAggregation(t *testing.T) {
	printed, out, code := scaffoldChart(t, "aggregated", "Engine")
	if code != 0 {
		t.Fatalf("scaffold: %d\n%s", code, printed)
	}
	role, b := readRole(t, out)
	escalate := slices.IndexFunc(role.Rules, func(r rbacv1.PolicyRule) bool { return slices.Contains(r.Verbs, "escalate") })
	if escalate < 0 || !slices.Equal(role.Rules[escalate].Resources, []string{"clusterroles"}) || len(role.Rules[escalate].Verbs) != 1 {
		t.Fatalf("role.yaml grants no escalate on clusterroles alone:\n%s", b)
	}
	if !strings.Contains(string(b), "which has an aggregationRule") {
		t.Errorf("role.yaml does not say why it grants escalate:\n%s", b)
	}
	ws, err := watches.Load(filepath.Join(out, "watches.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if len(ws[0].AllowAggregationLabels) != 3 || ws[0].PodSecurity != "restricted" {
		t.Errorf("watches.yaml: allowAggregationLabels %v, podSecurity %q", ws[0].AllowAggregationLabels, ws[0].PodSecurity)
	}
}

// TestScaffoldWritesThePodSecurityLevel: a node exporter's DaemonSet (host network and PID, a
// hostPath) passes only privileged: scaffold writes it, with what baseline refuses; a chart
// whose defaults pass restricted gets restricted, and what another value would need is said,
// not granted.
func TestScaffoldWritesThePodSecurityLevel(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{
		"exporter/Chart.yaml":  "apiVersion: v2\nname: exporter\nversion: 0.1.0\n",
		"exporter/values.yaml": "{}\n",
		"exporter/templates/ds.yaml": "apiVersion: apps/v1\nkind: DaemonSet\nmetadata: {name: '{{ .Release.Name }}'}\nspec:\n  selector: {matchLabels: {app: x}}\n" +
			"  template:\n    metadata: {labels: {app: x}}\n    spec:\n      hostNetwork: true\n      hostPID: true\n" +
			"      containers: [{name: node, image: i, volumeMounts: [{name: root, mountPath: /host}]}]\n      volumes: [{name: root, hostPath: {path: /}}]\n",
		"web/Chart.yaml":  "apiVersion: v2\nname: web\nversion: 0.1.0\n",
		"web/values.yaml": "debug:\n  enabled: false\n",
		"web/templates/deploy.yaml": "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: '{{ .Release.Name }}'}\nspec:\n  selector: {matchLabels: {app: x}}\n" +
			"  template:\n    metadata: {labels: {app: x}}\n    spec:\n      securityContext: {runAsNonRoot: true, seccompProfile: {type: RuntimeDefault}}\n" +
			"      containers: [{name: web, image: i, securityContext: {allowPrivilegeEscalation: false, capabilities: {drop: [ALL]}{{ if .Values.debug.enabled }}, privileged: true{{ end }}}}]\n",
	})
	for chart, want := range map[string][]string{
		"exporter": {"podSecurity: privileged", `violates PodSecurity "baseline:latest": host namespaces (hostNetwork=true, hostPID=true), hostPath volumes (volume "root")`},
		"web":      {"podSecurity: restricted", "Other values need more, which is not granted: with debug.enabled=true: privileged"},
	} {
		out := filepath.Join(dir, chart+"-out")
		code, stdout, stderr := runCLI("scaffold", "--chart", filepath.Join(dir, chart), "--group", "x.example.com", "--version", "v1", "--kind", "K", "--output", out)
		if code != 0 {
			t.Fatalf("%s: scaffold exit %d\n%s%s", chart, code, stdout, stderr)
		}
		entry, err := os.ReadFile(filepath.Join(out, "watches.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		for _, w := range want {
			if !strings.Contains(string(entry), w) {
				t.Errorf("%s: watches.yaml lacks %q:\n%s", chart, w, entry)
			}
		}
	}
}
