package health

import (
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"
)

var dbGVK = schema.GroupVersionKind{Group: "db.example.com", Version: "v1", Kind: "Database"}

func checker(t *testing.T) *Checker {
	t.Helper()
	c, err := Compile("healthChecks", []Check{{APIVersion: "db.example.com/v1", Kind: "Database",
		Current:    "status.phase == 'Running'",
		InProgress: "has(status.phase) && status.phase == 'Creating'",
		Failed:     "status.phase == 'Failed' || status.conditions.exists(c, c.type == 'Degraded' && c.status == 'True')"}})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestStatus(t *testing.T) {
	c := checker(t)
	for _, tc := range []struct {
		name   string
		obj    map[string]any
		want   status.Status
		inMsg  string
		judged bool
	}{
		{"no status", map[string]any{}, status.InProgressStatus, "no status yet", true},
		{"running", obj(1, 1, "Running"), status.CurrentStatus, "current (status.phase == 'Running') is true", true},
		{"creating", obj(1, 1, "Creating"), status.InProgressStatus, "inProgress", true},
		{"failed", obj(1, 1, "Failed"), status.FailedStatus, "failed (status.phase == 'Failed'", true},
		{"generation not observed", obj(2, 1, "Running"), status.InProgressStatus, "observedGeneration 1 is not the generation 2", true},
		{"unknown phase", obj(1, 1, "Sleeping"), status.InProgressStatus, "not true yet", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, msg, ok := c.Status(dbGVK, tc.obj)
			if ok != tc.judged || got != tc.want || !strings.Contains(msg, tc.inMsg) {
				t.Errorf("got %s %q %v, want %s with %q", got, msg, ok, tc.want, tc.inMsg)
			}
		})
	}
	if _, _, ok := c.Status(schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}, obj(1, 1, "x")); ok {
		t.Error("a kind without a check was judged")
	}
	var none *Checker
	if none.Judges(dbGVK) {
		t.Error("a nil Checker judges")
	}
}

func obj(gen, observed int64, phase string) map[string]any {
	return map[string]any{"metadata": map[string]any{"generation": gen},
		"status": map[string]any{"observedGeneration": observed, "phase": phase, "conditions": []any{}}}
}

func TestCompileErrors(t *testing.T) {
	for _, tc := range []struct {
		check Check
		want  string
	}{
		{Check{APIVersion: "v1", Kind: "Pod", Current: "status.phase =="}, "healthChecks[0].current: ERROR: <input>:1:"},
		{Check{APIVersion: "v1", Kind: "Pod", Current: "nope.phase == 'x'"}, "undeclared reference to 'nope'"},
		{Check{APIVersion: "v1", Kind: "Pod", Current: "'a string'"}, "not a bool"},
		{Check{APIVersion: "v1", Kind: "Pod"}, "healthChecks[0].current: is required"},
		{Check{Kind: "Pod", Current: "true"}, "healthChecks[0].apiVersion"},
	} {
		_, err := Compile("healthChecks", []Check{tc.check})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: error %v, want one with %q", tc.check, err, tc.want)
		}
	}
}

// TestCostIsBounded: an expression that does more work than the API server allows one call
// stops at the bound, leaving the object InProgress and saying so. (The time bound is raised
// for the test: on a loaded machine the work up to the cost bound can take longer than it.)
func TestCostIsBounded(t *testing.T) {
	defer func(d time.Duration) { evalTimeout = d }(evalTimeout)
	evalTimeout = time.Minute
	c, err := Compile("healthChecks", []Check{{APIVersion: "v1", Kind: "Thing",
		Current: "status.items.all(a, status.items.all(b, status.items.all(c, a + b + c >= 0)))"}})
	if err != nil {
		t.Fatal(err)
	}
	items := make([]any, 300)
	for i := range items {
		items[i] = int64(i)
	}
	got, msg, _ := c.Status(schema.GroupVersionKind{Version: "v1", Kind: "Thing"}, map[string]any{"status": map[string]any{"items": items}})
	if got != status.InProgressStatus || !strings.Contains(msg, "cost limit") {
		t.Errorf("got %s %q, want InProgress at the cost limit", got, msg)
	}
}
