package controllers_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	rstatus "github.com/rudder-operator/rudder/api/status"
	"github.com/rudder-operator/rudder/internal/cli"
	"github.com/rudder-operator/rudder/internal/crtest"
	"github.com/rudder-operator/rudder/internal/machine"
	"github.com/rudder-operator/rudder/internal/records"
)

// The day-2 verbs (issue 70) against the rudder the suite runs, on Day2CLI (the day2 chart,
// its CRD of category rudder).

// cliRun is one run of rudder's command line against the test cluster; now, when set, is the
// time the verbs read.
type cliRun struct {
	stdout, stderr string
	code           int
}

func rudderCLI(t *testing.T, now time.Time, args ...string) cliRun {
	t.Helper()
	var out, errOut bytes.Buffer
	env := cli.Env{Stdout: &out, Stderr: &errOut}
	if !now.IsZero() {
		env.Now = func() time.Time { return now }
	}
	kc := []string{"--kubeconfig", cluster.Kubeconfig}
	if args[0] == "__complete" { // the last argument is the word completed
		args = slices.Concat(args[:len(args)-1], kc, args[len(args)-1:])
	} else {
		args = append(args, kc...)
	}
	code := cli.Run(context.Background(), args, env)
	return cliRun{stdout: out.String(), stderr: errOut.String(), code: code}
}

// must is r, which must have exited 0.
func (r cliRun) must(t *testing.T, args ...string) cliRun {
	t.Helper()
	if r.code != 0 {
		t.Fatalf("rudder %s: exit %d\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), r.code, r.stdout, r.stderr)
	}
	return r
}

func rudderOK(t *testing.T, args ...string) cliRun {
	t.Helper()
	return rudderCLI(t, time.Time{}, args...).must(t, args...)
}

// image is the image of Deployment name's container.
func image(t *testing.T, ns, name string) string {
	t.Helper()
	return deployment(t, ns, name).Spec.Template.Spec.Containers[0].Image
}

// The table `rudder get KIND -n NS` prints of a CR installed a minute and a half ago: the
// column widths are the golden part (kubectl's tabwriter); %s is the chart's digest.
const getGolden = `NAME   READY   REVISION   CHART                     SUSPENDED   LAST ACTION        AGE
web    True    1          day2-0.1.0@%s   false       InstallSucceeded   90s
`

// TestDay2Verbs: get (table, -o json, -A -o name), reconcile --wait, suspend against a spec
// change and resume, history, rollback and tree, and the errors scripts read.
func TestDay2Verbs(t *testing.T) {
	crtest.NeedsCluster(t)
	t.Parallel()
	ns := crtest.NewNamespace(t, k8s, "verbs-")
	create(t, crtest.NewCR(day2CLIGVK, ns, "web", map[string]any{}))
	u := waitReadyOn(t, day2CLIGVK, ns, "web", 1)
	digest, _, _ := unstructured.NestedString(u.Object, "status", "release", "chartDigest")

	t.Run("get", func(t *testing.T) {
		args := []string{"get", "day2cli", "-n", ns}
		got := rudderCLI(t, u.GetCreationTimestamp().Add(90*time.Second), args...).must(t, args...)
		if want := fmt.Sprintf(getGolden, records.DisplayDigest(digest)); got.stdout != want {
			t.Fatalf("rudder get:\n%s\nwant:\n%s", got.stdout, want)
		}
		var list unstructured.UnstructuredList
		if err := list.UnmarshalJSON([]byte(rudderOK(t, "get", "day2cli", "web", "-n", ns, "-o", "json").stdout)); err != nil {
			t.Fatal(err)
		}
		if len(list.Items) != 1 || list.Items[0].GetName() != "web" {
			t.Fatalf("get -o json: %d items", len(list.Items))
		}
		if rev, _, _ := unstructured.NestedInt64(list.Items[0].Object, "status", "release", "revision"); rev != 1 {
			t.Fatalf("get -o json: status.release.revision %d, want 1", rev)
		}
		// Every kind of category rudder, across namespaces: this CR among them.
		if out := rudderOK(t, "get", "-A", "-o", "name").stdout; !strings.Contains(out, "day2cli.test.rudder.dev/web\n") {
			t.Fatalf("get -A -o name does not list the CR:\n%s", out)
		}
	})

	t.Run("reconcile", func(t *testing.T) {
		out := rudderOK(t, "reconcile", "day2cli", "web", "-n", ns)
		if want := fmt.Sprintf("Day2CLI/%s/web reconciled: revision 1, Ready: ", ns); !strings.HasPrefix(out.stdout, want) {
			t.Fatalf("reconcile printed %q, want %q…", out.stdout, want)
		}
		// It returned after the pass that handled its value, not before.
		u := crtest.MustGet(t, k8s, day2CLIGVK, ns, "web")
		asked := u.GetAnnotations()[machine.AnnotationReconcileAt]
		if handled, _, _ := unstructured.NestedString(u.Object, "status", "release", "reconcileRequest"); asked == "" || handled != asked {
			t.Fatalf("reconcile returned with %s=%q but status.release.reconcileRequest=%q", machine.AnnotationReconcileAt, asked, handled)
		}
	})

	t.Run("suspend and resume", func(t *testing.T) {
		rudderOK(t, "suspend", "day2cli", "web", "-n", ns)
		crtest.Update(t, k8s, day2CLIGVK, ns, "web", func(u *unstructured.Unstructured) { u.Object["spec"] = map[string]any{"image": "nginx:2"} })
		crtest.WaitCondition(t, k8s, day2CLIGVK, ns, "web", rstatus.TypePaused, metav1.ConditionTrue, "", timeout)
		passes.Passes(t, k8s, day2CLIGVK, ns, "web", 2)
		if got := image(t, ns, "web"); got != "nginx:1" {
			t.Fatalf("a suspended CR's spec change reached the Deployment: image %s", got)
		}
		if out := rudderOK(t, "get", "day2cli", "web", "-n", ns).stdout; !strings.Contains(out, " true ") {
			t.Fatalf("get does not show the CR suspended:\n%s", out)
		}
		if r := rudderCLI(t, time.Time{}, "reconcile", "day2cli", "web", "-n", ns); r.code != 1 || !strings.Contains(r.stderr, "is suspended") {
			t.Fatalf("reconcile of a suspended CR: exit %d, %s", r.code, r.stderr)
		}
		out := rudderOK(t, "resume", "day2cli", "web", "-n", ns)
		if !strings.Contains(out.stdout, "resumed: revision 2, Ready") || image(t, ns, "web") != "nginx:2" {
			t.Fatalf("resume: %s; image %s", out.stdout, image(t, ns, "web"))
		}
	})

	t.Run("history and rollback", func(t *testing.T) {
		var hist []struct {
			Revision    int    `json:"revision"`
			Status      string `json:"status"`
			Description string `json:"description"`
		}
		if err := json.Unmarshal([]byte(rudderOK(t, "history", "day2cli", "web", "-n", ns, "-o", "json").stdout), &hist); err != nil {
			t.Fatal(err)
		}
		if len(hist) != 2 || hist[0].Status != "superseded" || hist[1].Status != "deployed" {
			t.Fatalf("history: %+v", hist)
		}
		out := rudderOK(t, "rollback", "day2cli", "web", "1", "-n", ns)
		if want := fmt.Sprintf("Day2CLI/%s/web rolled back to revision 1: now revision 3\n", ns); out.stdout != want || image(t, ns, "web") != "nginx:1" {
			t.Fatalf("rollback printed %q, want %q; image %s", out.stdout, want, image(t, ns, "web"))
		}
		table := rudderOK(t, "history", "day2cli", "web", "-n", ns).stdout
		lines := strings.Split(strings.TrimSpace(table), "\n")
		if len(lines) != 4 || !strings.HasPrefix(lines[0], "REVISION") || !strings.HasPrefix(lines[3], "3 ") ||
			!strings.Contains(lines[3], "deployed") || !strings.Contains(lines[3], "day2-0.1.0") {
			t.Fatalf("history after the rollback:\n%s", table)
		}
		// A revision the history does not hold: refused, exit 1, the reason printed.
		r := rudderCLI(t, time.Time{}, "rollback", "day2cli", "web", "99", "-n", ns)
		if r.code != 1 || !strings.Contains(r.stderr, "rollback to revision 99 refused") {
			t.Fatalf("rollback to 99: exit %d, %s", r.code, r.stderr)
		}
	})

	t.Run("tree", func(t *testing.T) {
		out := rudderOK(t, "tree", "day2cli", "web", "-n", ns).stdout
		want := "Day2CLI/web (Ready: True, revision 3)\n├── ConfigMap/web  Current\n└── Deployment/web  Current"
		if !strings.HasPrefix(out, want) {
			t.Fatalf("tree:\n%s\nwant:\n%s", out, want)
		}
		var tree struct {
			Revision int `json:"revision"`
			Objects  []struct {
				Kind, Name, Status string
			} `json:"objects"`
		}
		if err := json.Unmarshal([]byte(rudderOK(t, "tree", "day2cli", "web", "-n", ns, "-o", "json").stdout), &tree); err != nil {
			t.Fatal(err)
		}
		if tree.Revision != 3 || len(tree.Objects) != 2 || tree.Objects[1].Kind != "Deployment" || tree.Objects[1].Status != "Current" {
			t.Fatalf("tree -o json: %+v", tree)
		}
	})

	t.Run("completion", func(t *testing.T) {
		// cobra's __complete, which the shells' completion scripts call.
		kinds := rudderOK(t, "__complete", "reconcile", "-n", ns, "").stdout
		if !strings.Contains(kinds, "day2clis.test.rudder.dev\tDay2CLI\n") || !strings.Contains(kinds, "nginxoperators.operator.example.com\t") {
			t.Fatalf("the kinds completed:\n%s", kinds)
		}
		if names := rudderOK(t, "__complete", "tree", "day2cli", "-n", ns, "").stdout; !strings.HasPrefix(names, "web\n:4\n") {
			t.Fatalf("the names completed:\n%s", names)
		}
	})

	t.Run("errors", func(t *testing.T) {
		for _, c := range []struct {
			args []string
			code int
			says string
		}{
			{[]string{"reconcile", "day2cli", "nope", "-n", ns}, 1, "Day2CLI " + ns + "/nope not found"},
			{[]string{"get", "nokind", "-n", ns}, 1, `the cluster serves no kind "nokind"`},
			{[]string{"rollback", "day2cli", "web", "first", "-n", ns}, 2, `REVISION "first": must be a revision number`},
			{[]string{"suspend", "day2cli", "-n", ns}, 2, "name the CRs or give --all"},
			{[]string{"get", "day2cli", "-n", ns, "-o", "xml"}, 2, `-o "xml"`},
		} {
			r := rudderCLI(t, time.Time{}, c.args...)
			if r.code != c.code || !strings.Contains(r.stderr, c.says) {
				t.Errorf("rudder %s: exit %d, stderr %q; want exit %d saying %q", strings.Join(c.args, " "), r.code, r.stderr, c.code, c.says)
			}
		}
	})
}
