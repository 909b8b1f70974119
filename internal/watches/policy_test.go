package watches

import (
	"reflect"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/rudder-operator/rudder/internal/helm"
)

func parseOne(t *testing.T, entry string) (*Watch, error) {
	t.Helper()
	ws, err := Parse([]byte("- {group: a.io, version: v1, kind: A, chart: c, "+entry+"}"), "/base", func(string) (string, bool) { return "", false })
	if err != nil {
		return nil, err
	}
	return ws[0], nil
}

// Each policy field is validated, and its error names the field.
func TestPoliciesInvalid(t *testing.T) {
	t.Parallel()
	for entry, want := range map[string]string{
		"crds: {install: CreateReplace}":                                                 `crds.install: "CreateReplace" must be Create or Skip`,
		"crds: {upgrade: Replace}":                                                       `crds.upgrade: "Replace" must be`,
		"crds: {upgrade: CreateReplace}":                                                 "crds.upgrade: CreateReplace needs allowClusterScoped to name CustomResourceDefinition",
		"driftDetection: {mode: none}":                                                   `driftDetection.mode: "none" must be enabled, warn or disabled`,
		"driftDetection: {ignore: [{paths: [spec/replicas]}]}":                           "driftDetection.ignore[0].paths[0]: \"spec/replicas\" is not a JSON pointer",
		"driftDetection: {ignore: [{}]}":                                                 "driftDetection.ignore[0].paths: at least one",
		"driftDetection: {ignore: [{paths: [/a], target: {name: '('}}]}":                 "driftDetection.ignore[0].target.name:",
		"driftDetection: {ignore: [{paths: [/a], target: {labelSelector: 'a in'}}]}":     "driftDetection.ignore[0].target.labelSelector:",
		"remediation: {retries: -1}":                                                     "remediation.retries: -1 must be between 0 and 10",
		"remediation: {retries: 11}":                                                     "remediation.retries: 11 must be between 0 and 10",
		"upgrade: {force: maybe}":                                                        "upgrade.force",
		"wait: {kinds: [Deployment]}":                                                    "wait.enable: jobs and kinds scope a wait, which needs enable: true",
		"wait: {enable: true, kinds: [apps/Deployment]}":                                 `wait.kinds[0]: "apps/Deployment" is not Kind or Kind.group`,
		"upgrade: {serverSideApply: always}":                                             `upgrade.serverSideApply: "always" must be auto, true or false`,
		"upgrade: {serverSideApply: [true]}":                                             "upgrade.serverSideApply: [true] must be auto, true or false",
		"rollout: {}":                                                                    "rollout.waves: at least one wave",
		"rollout: {waves: [{count: 1, percent: 5}]}":                                     "rollout.waves[0]: exactly one of count, percent and selector",
		"rollout: {waves: [{percent: 101}]}":                                             "rollout.waves[0].percent: 101 must be between 1 and 100",
		"rollout: {waves: [{count: -1}]}":                                                "rollout.waves[0].count: -1 must be positive",
		"rollout: {waves: [{count: 2}, {count: 2}]}":                                     "rollout.waves[1].count: 2 moves no CR that the waves before it do not (count 2)",
		"rollout: {waves: [{percent: 50}, {percent: 25}]}":                               "rollout.waves[1].percent: 25 moves no CR that the waves before it do not (percent 50)",
		"rollout: {waves: [{count: 1}, {selector: {matchLabels: {a: b}}}]}":              "rollout.waves[1].selector: only the first wave",
		"rollout: {waves: [{selector: {matchExpressions: [{key: a, operator: Nope}]}}]}": "rollout.waves[0].selector:",
		"rollout: {waves: [{count: 1}], onHalt: revert}":                                 `rollout.onHalt: "revert" must be hold or rollback`,
		"rollout: {waves: [{count: 1}], maxFailures: -1}":                                "rollout.maxFailures: -1 must not be negative",
		"rollout: {waves: [{count: 1}], settle: -1s}":                                    "rollout.settle: -1s must not be negative",
	} {
		_, err := parseOne(t, entry)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: error %v, want it to say %q", entry, err, want)
		}
	}
}

// The defaults are Helm's and today's: crds/ created on install and skipped on upgrade, drift
// restored with nothing ignored, no force, no retries.
func TestPolicyDefaultsAndTargets(t *testing.T) {
	t.Parallel()
	w, err := parseOne(t, "")
	if err != nil {
		t.Fatal(err)
	}
	if p := w.Policies(); p.CRDPolicy() != (helm.CRDPolicy{Install: helm.CRDsCreate, Upgrade: helm.CRDsSkip}) || p.DriftMode() != DriftEnabled || p.Forces() || p.Retries() != 0 {
		t.Fatalf("defaults: %+v %s %v %d", p.CRDPolicy(), p.DriftMode(), p.Forces(), p.Retries())
	}
	if w.Policies().ApplyPolicy() != (helm.ApplyPolicy{}) {
		t.Fatalf("apply policy by default: %+v, want client-side as recorded", w.Policies().ApplyPolicy())
	}
	// upgrade.serverSideApply takes YAML's boolean as Helm's word for it.
	for entry, want := range map[string]helm.ApplyPolicy{
		"install: {serverSideApply: true}":                                   {Install: true},
		"upgrade: {serverSideApply: true, forceConflicts: true}":             {Upgrade: helm.ApplyServer, ForceConflicts: true},
		"upgrade: {serverSideApply: 'false'}":                                {Upgrade: helm.ApplyClient},
		"install: {serverSideApply: true}, upgrade: {serverSideApply: auto}": {Install: true, Upgrade: helm.ApplyAuto},
	} {
		w, err := parseOne(t, entry)
		if err != nil {
			t.Errorf("%s: %v", entry, err)
		} else if w.Policies().ApplyPolicy() != want {
			t.Errorf("%s: %+v, want %+v", entry, w.Policies().ApplyPolicy(), want)
		}
	}
	w, err = parseOne(t, `allowClusterScoped: [CustomResourceDefinition], crds: {install: Skip, upgrade: CreateReplace}, upgrade: {force: true}, remediation: {retries: 3},
  driftDetection: {mode: warn, ignore: [{paths: [/spec/replicas], target: {kind: Deployment, name: 'web-.*', labelSelector: 'tier=front'}}, {paths: [/metadata/annotations/x]}]}`)
	if err != nil {
		t.Fatal(err)
	}
	if p := w.Policies(); p.CRDPolicy() != (helm.CRDPolicy{Install: helm.CRDsSkip, Upgrade: helm.CRDsCreateReplace}) || p.DriftMode() != DriftWarn || !p.Forces() || p.Retries() != 3 {
		t.Fatalf("set: %+v %s %v %d", p.CRDPolicy(), p.DriftMode(), p.Forces(), p.Retries())
	}
	obj := func(kind, name string, labels map[string]string) *unstructured.Unstructured {
		u := &unstructured.Unstructured{}
		u.SetAPIVersion("apps/v1")
		u.SetKind(kind)
		u.SetName(name)
		u.SetLabels(labels)
		return u
	}
	for _, tc := range []struct {
		obj  *unstructured.Unstructured
		want []string
	}{
		{obj("Deployment", "web-1", map[string]string{"tier": "front"}), []string{"/spec/replicas", "/metadata/annotations/x"}},
		{obj("Deployment", "web-1", nil), []string{"/metadata/annotations/x"}},
		{obj("Deployment", "xweb-1", map[string]string{"tier": "front"}), []string{"/metadata/annotations/x"}},
		{obj("StatefulSet", "web-1", map[string]string{"tier": "front"}), []string{"/metadata/annotations/x"}},
	} {
		if got := w.Policies().DriftIgnored(tc.obj); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s %s %v: ignored %v, want %v", tc.obj.GetKind(), tc.obj.GetName(), tc.obj.GetLabels(), got, tc.want)
		}
	}
}
