package controllers_test

import (
	"strings"
	"testing"

	"helm.sh/helm/v4/pkg/release/common"

	"github.com/rudder-operator/rudder/internal/crtest"
	"github.com/rudder-operator/rudder/internal/helm/helmtest"
)

// TestBothHelmCLIsServeRuddersReleases: the Helm CLI users run (Helm 4, bin/helm) and the last
// Helm 3 (bin/helm3) both list, show and roll back the releases rudder writes, and rudder
// takes over what each of them wrote: a rollback by either sticks, and the next spec change
// upgrades from it.
func TestBothHelmCLIsServeRuddersReleases(t *testing.T) {
	t.Parallel()
	ns := crtest.NewNamespace(t, k8s, "t-")
	widgetAt(t, ns, "cli") // revisions 1 ("one") and 2 ("two"), made by rudder

	for _, cli := range []string{"helm", "helm3"} {
		run := func(args ...string) string {
			t.Helper()
			out, err := cluster.Command(cli, append(args, "-n", ns)...).CombinedOutput()
			if err != nil {
				t.Fatalf("%s %v: %v\n%s", cli, args, err, out)
			}
			return string(out)
		}
		if out := run("history", "cli"); !strings.Contains(out, "rudder install: generation 1") || !strings.Contains(out, "rudder upgrade: generation 2") {
			t.Errorf("%s history:\n%s", cli, out)
		}
		if out := run("get", "manifest", "cli"); !strings.Contains(out, "kind: ConfigMap") || !strings.Contains(out, "message: two") {
			t.Errorf("%s get manifest:\n%s", cli, out)
		}
		if out := run("get", "values", "cli"); !strings.Contains(out, "message: two") {
			t.Errorf("%s get values:\n%s", cli, out)
		}
		if out := run("get", "values", "cli", "--revision", "1"); !strings.Contains(out, "message: one") {
			t.Errorf("%s get values --revision 1:\n%s", cli, out)
		}
	}

	// Helm 3 rolls back to 1 (revision 3), then Helm 4 to 2 (revision 4): each sticks.
	if out, err := cluster.Command("helm3", "rollback", "cli", "1", "-n", ns).CombinedOutput(); err != nil {
		t.Fatalf("helm3 rollback: %v\n%s", err, out)
	}
	waitRevision(t, ns, "cli", 3, 1)
	if got := configMapMessage(t, ns, "cli"); got != "one" {
		t.Fatalf("after Helm 3's rollback the ConfigMap says %q, want one", got)
	}
	if out, err := cluster.Command("helm", "rollback", "cli", "2", "-n", ns).CombinedOutput(); err != nil {
		t.Fatalf("helm (4) rollback: %v\n%s", err, out)
	}
	waitRevision(t, ns, "cli", 4, 2)
	if got := configMapMessage(t, ns, "cli"); got != "two" {
		t.Fatalf("after Helm 4's rollback the ConfigMap says %q, want two", got)
	}
	// Helm 3 reads what Helm 4 wrote.
	if out, err := cluster.Command("helm3", "history", "cli", "-n", ns).CombinedOutput(); err != nil || !strings.Contains(string(out), "Rollback to 2") {
		t.Fatalf("helm3 history after Helm 4's rollback: %v\n%s", err, out)
	}

	// rudder upgrades from Helm 4's revision when the spec changes.
	setSpec(t, ns, "cli", "three")
	waitRevision(t, ns, "cli", 5, 0)
	h := helmtest.History(t, cluster.Kubeconfig, ns, "cli")
	if len(h) != 5 || h[2].Info.Description != "Rollback to 1" || h[3].Info.Description != "Rollback to 2" ||
		h[4].Info.Status != common.StatusDeployed || !strings.HasPrefix(h[4].Info.Description, "rudder upgrade") {
		t.Fatalf("history: %s", describe(h))
	}
	if got := configMapMessage(t, ns, "cli"); got != "three" {
		t.Fatalf("after the spec change the ConfigMap says %q, want three", got)
	}
}
