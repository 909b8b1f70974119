package controllers_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	rstatus "github.com/rudder-operator/rudder/api/status"
	"github.com/rudder-operator/rudder/internal/crtest"
	"github.com/rudder-operator/rudder/internal/helm/helmtest"
	"github.com/rudder-operator/rudder/internal/machine"
	"github.com/rudder-operator/rudder/internal/watches"
)

// Ordering between CRs (issue 71): DepApp (the widget chart) may depend on DepDb (the waited
// chart: a Deployment whose Pods ask for a node label, so that the test says when it becomes
// ready) and on DepApp. The suite's watches have no reconcile period: every pass below is
// taken by an event, none by a poll.

var (
	depDbGVK  = schema.GroupVersionKind{Group: "test.rudder.dev", Version: "v1", Kind: "DepDb"}
	depAppGVK = schema.GroupVersionKind{Group: "test.rudder.dev", Version: "v1", Kind: "DepApp"}
)

func dependent(ns, name, dependsOn string, spec map[string]any) *unstructured.Unstructured {
	u := crtest.NewCR(depAppGVK, ns, name, spec)
	u.SetAnnotations(map[string]string{watches.AnnotationDependsOn: dependsOn})
	return u
}

// waitReason waits for cond of the CR to have status and reason on the CR's current generation,
// and returns its message.
func waitReason(t *testing.T, gvk schema.GroupVersionKind, ns, name, cond string, status metav1.ConditionStatus, reason string) string {
	t.Helper()
	var msg string
	crtest.Eventually(t, gvk.Kind+" "+name+" "+cond+"="+string(status)+" "+reason, timeout, func(ctx context.Context) (bool, error) {
		u, err := crtest.Get(ctx, k8s, gvk, ns, name)
		if err != nil {
			return false, err
		}
		c := crtest.Condition(u, cond)
		if c == nil || c.ObservedGeneration != u.GetGeneration() {
			return false, nil
		}
		msg = c.Message
		if c.Status != status || c.Reason != reason {
			return false, fmt.Errorf("%s is %s, %s: %s", cond, c.Status, c.Reason, c.Message) // said if it never is
		}
		return true, nil
	})
	return msg
}

// TestDependsOn: an app waits for its database to be Ready, then installs; an upgrade of the
// database holds the app's upgrade until the database is Ready again.
func TestDependsOn(t *testing.T) {
	crtest.NeedsCluster(t)
	t.Parallel()
	ns := crtest.NewNamespace(t, k8s, "depends-")
	first, second := "depends.test.rudder.dev/"+ns, "depends2.test.rudder.dev/"+ns
	t.Cleanup(func() { labelNode(t, first, nil); labelNode(t, second, nil) })
	create(t, crtest.NewCR(depDbGVK, ns, "db", map[string]any{"nodeSelector": map[string]any{first: "yes"}}))
	create(t, dependent(ns, "app", "DepDb/db", map[string]any{"message": "one"}))

	// The database is installed, and not ready: the app waits, with no release.
	waitReason(t, depDbGVK, ns, "db", rstatus.TypeReleased, metav1.ConditionTrue, rstatus.ReasonInstallSucceeded)
	// Before the database's first status, the app says it has none; after, what it says. The
	// database's status write wakes the app.
	crtest.Eventually(t, "the app naming why its database is not ready", timeout, func(context.Context) (bool, error) {
		msg := waitReason(t, depAppGVK, ns, "app", rstatus.TypeReady, metav1.ConditionFalse, rstatus.ReasonDependencyNotReady)
		if !strings.HasPrefix(msg, "waiting for DepDb/"+ns+"/db: ") {
			return false, fmt.Errorf("the condition does not name the dependency: %s", msg)
		}
		return strings.Contains(msg, "Ready=False, Progressing"), nil
	})
	if h := helmtest.History(t, cluster.Kubeconfig, ns, "app"); len(h) != 0 {
		t.Fatalf("the app was released before its database was ready:%s", describe(h))
	}
	wantEvent(t, ns, "app", rstatus.ReasonDependencyNotReady)

	// The database becomes ready: the app is installed, woken by the database's change.
	labelNode(t, first, new("yes"))
	waitReason(t, depDbGVK, ns, "db", rstatus.TypeReady, metav1.ConditionTrue, rstatus.ReasonObjectsReady)
	waitReason(t, depAppGVK, ns, "app", rstatus.TypeReady, metav1.ConditionTrue, rstatus.ReasonObjectsReady)
	waitMessage(t, ns, "app", "one")

	// The database is upgraded to a Deployment that cannot roll out yet; once rudder has seen
	// it, the app's own upgrade waits for it.
	db, err := crtest.Get(context.Background(), k8s, depDbGVK, ns, "db")
	if err != nil {
		t.Fatal(err)
	}
	db.Object["spec"] = map[string]any{"nodeSelector": map[string]any{second: "yes"}}
	update(t, db)
	waitReason(t, depDbGVK, ns, "db", rstatus.TypeReady, metav1.ConditionFalse, rstatus.ReasonProgressing)
	app, err := crtest.Get(context.Background(), k8s, depAppGVK, ns, "app")
	if err != nil {
		t.Fatal(err)
	}
	app.Object["spec"] = map[string]any{"message": "two"}
	update(t, app)
	waitReason(t, depAppGVK, ns, "app", rstatus.TypeReady, metav1.ConditionFalse, rstatus.ReasonDependencyNotReady)
	if got := releaseRevisions(t, ns, "app"); strings.Join(got, " ") != "1:deployed" {
		t.Fatalf("the app was upgraded while its database was not ready: %v", got)
	}
	labelNode(t, second, new("yes"))
	wantRevisions(t, ns, "app", 2)
	waitMessage(t, ns, "app", "two")
	waitReason(t, depAppGVK, ns, "app", rstatus.TypeReady, metav1.ConditionTrue, rstatus.ReasonObjectsReady)
}

// TestDependsOnReadyExpr: a dependency of a kind with a readyExpr (Gadget: a label "ready")
// is ready when the expression is true, whatever its Ready condition says.
func TestDependsOnReadyExpr(t *testing.T) {
	crtest.NeedsCluster(t)
	t.Parallel()
	ns := crtest.NewNamespace(t, k8s, "depexpr-")
	create(t, crtest.NewCR(gadgetGVK, ns, "labelled", nil))
	create(t, dependent(ns, "app", "Gadget/labelled", nil))
	waitReason(t, gadgetGVK, ns, "labelled", rstatus.TypeReady, metav1.ConditionTrue, rstatus.ReasonObjectsReady)
	crtest.Eventually(t, "the app waiting for the readyExpr", timeout, func(context.Context) (bool, error) {
		msg := waitReason(t, depAppGVK, ns, "app", rstatus.TypeReady, metav1.ConditionFalse, rstatus.ReasonDependencyNotReady)
		return strings.Contains(msg, "Gadget/"+ns+"/labelled: readyExpr"), nil
	})
	if h := helmtest.History(t, cluster.Kubeconfig, ns, "app"); len(h) != 0 {
		t.Fatalf("the app was released before its dependency's readyExpr was true:%s", describe(h))
	}
	g, err := crtest.Get(context.Background(), k8s, gadgetGVK, ns, "labelled")
	if err != nil {
		t.Fatal(err)
	}
	g.SetLabels(map[string]string{"ready": "yes"})
	update(t, g)
	waitReason(t, depAppGVK, ns, "app", rstatus.TypeReady, metav1.ConditionTrue, rstatus.ReasonObjectsReady)
}

// TestDependsOnRefused: a cycle, a missing dependency, another namespace and a kind the watch
// does not name each get their condition, and nothing is released for them.
func TestDependsOnRefused(t *testing.T) {
	crtest.NeedsCluster(t)
	t.Parallel()
	ns := crtest.NewNamespace(t, k8s, "dependsno-")
	create(t, dependent(ns, "a", "DepApp/b", nil))
	create(t, dependent(ns, "b", "DepApp/c", nil))
	create(t, dependent(ns, "c", "DepApp/a", nil))
	create(t, dependent(ns, "lonely", "DepDb/nowhere", nil))
	create(t, dependent(ns, "abroad", "DepDb/elsewhere/db", nil))
	create(t, dependent(ns, "shared", "DepDb/dep-shared/db", nil))
	create(t, dependent(ns, "odd", "Widget/w", nil))
	plain := crtest.NewCR(widgetGVK, ns, "plain", nil)
	plain.SetAnnotations(map[string]string{watches.AnnotationDependsOn: "DepDb/db"})
	create(t, plain)

	msg := waitReason(t, depAppGVK, ns, "a", rstatus.TypeStalled, metav1.ConditionTrue, rstatus.ReasonDependencyCycle)
	if want := "DepApp/" + ns + "/a → DepApp/" + ns + "/b → DepApp/" + ns + "/c → DepApp/" + ns + "/a"; !strings.Contains(msg, want) {
		t.Fatalf("the cycle is not named: %s, want %s", msg, want)
	}
	waitReason(t, depAppGVK, ns, "c", rstatus.TypeStalled, metav1.ConditionTrue, rstatus.ReasonDependencyCycle)
	msg = waitReason(t, depAppGVK, ns, "lonely", rstatus.TypeReady, metav1.ConditionFalse, rstatus.ReasonDependencyNotReady)
	if !strings.Contains(msg, "DepDb/"+ns+"/nowhere: not found") {
		t.Fatalf("the missing dependency is not named: %s", msg)
	}
	msg = waitReason(t, depAppGVK, ns, "abroad", rstatus.TypeStalled, metav1.ConditionTrue, rstatus.ReasonDependencyInvalid)
	if !strings.Contains(msg, "namespace elsewhere") || !strings.Contains(msg, "dependsOn.allowNamespaces") {
		t.Fatalf("the other namespace is not refused by name: %s", msg)
	}
	// A namespace the watch allows is waited for like the CR's own.
	msg = waitReason(t, depAppGVK, ns, "shared", rstatus.TypeReady, metav1.ConditionFalse, rstatus.ReasonDependencyNotReady)
	if !strings.Contains(msg, "DepDb/dep-shared/db: not found") {
		t.Fatalf("the allowed namespace's dependency: %s", msg)
	}
	msg = waitReason(t, depAppGVK, ns, "odd", rstatus.TypeStalled, metav1.ConditionTrue, rstatus.ReasonDependencyInvalid)
	if !strings.Contains(msg, "Widget is not a kind this kind's CRs may depend on") {
		t.Fatalf("the kind the watch does not name: %s", msg)
	}
	// A kind whose watch has no dependsOn is told its CRs may depend on nothing.
	msg = waitReason(t, widgetGVK, ns, "plain", rstatus.TypeStalled, metav1.ConditionTrue, rstatus.ReasonDependencyInvalid)
	if !strings.Contains(msg, "has no dependsOn") {
		t.Fatalf("a kind without dependsOn: %s", msg)
	}
	for _, name := range []string{"a", "b", "c", "lonely", "abroad", "shared", "odd", "plain"} {
		if h := helmtest.History(t, cluster.Kubeconfig, ns, name); len(h) != 0 {
			t.Fatalf("%s was released:%s", name, describe(h))
		}
	}

	// Breaking the cycle releases its CRs, in order: c first (it depends on nothing now).
	c, err := crtest.Get(context.Background(), k8s, depAppGVK, ns, "c")
	if err != nil {
		t.Fatal(err)
	}
	c.SetAnnotations(nil)
	update(t, c)
	for _, name := range []string{"c", "b", "a"} {
		waitReason(t, depAppGVK, ns, name, rstatus.TypeReady, metav1.ConditionTrue, rstatus.ReasonObjectsReady)
	}
}

// wantEvent waits for an Event of reason on the CR name of namespace ns.
func wantEvent(t *testing.T, ns, name, reason string) {
	t.Helper()
	crtest.Eventually(t, "an Event "+reason+" on "+name, timeout, func(ctx context.Context) (bool, error) {
		var evs corev1.EventList
		if err := k8s.List(ctx, &evs, client.InNamespace(ns)); err != nil {
			return false, err
		}
		return slices.ContainsFunc(evs.Items, func(e corev1.Event) bool { return e.InvolvedObject.Name == name && e.Reason == reason }), nil
	})
}

// TestDeleteAfterDependents: a database asked to be deleted after its dependents keeps its
// release while an app depends on it, saying which, and is uninstalled once the app is gone;
// one whose app stays is uninstalled when its bound is over, with a Warning Event.
func TestDeleteAfterDependents(t *testing.T) {
	crtest.NeedsCluster(t)
	t.Parallel()
	ctx := context.Background()
	ns := crtest.NewNamespace(t, k8s, "depdel-")
	for db, wait := range map[string]string{"db": "true", "brief": "3s"} {
		u := crtest.NewCR(depDbGVK, ns, db, nil)
		u.SetAnnotations(map[string]string{watches.AnnotationDeleteAfterDependents: wait})
		create(t, u)
		create(t, dependent(ns, db+"-app", "DepDb/"+db, nil))
	}
	for _, name := range []string{"db", "brief"} {
		waitReason(t, depDbGVK, ns, name, rstatus.TypeReady, metav1.ConditionTrue, rstatus.ReasonObjectsReady)
		waitReason(t, depAppGVK, ns, name+"-app", rstatus.TypeReady, metav1.ConditionTrue, rstatus.ReasonObjectsReady)
		if err := k8s.Delete(ctx, crtest.NewCR(depDbGVK, ns, name, nil)); err != nil {
			t.Fatal(err)
		}
	}
	msg := waitReason(t, depDbGVK, ns, "db", rstatus.TypeReady, metav1.ConditionFalse, rstatus.ReasonDependentsRemain)
	if !strings.Contains(msg, "DepApp/"+ns+"/db-app") {
		t.Fatalf("the condition does not name the dependent: %s", msg)
	}
	if got := releaseRevisions(t, ns, "db"); len(got) != 1 {
		t.Fatalf("the database's release while its app remains: %v", got)
	}

	// The bound: uninstalled while its app remains, saying so.
	gone := func(gvk schema.GroupVersionKind, name string) {
		t.Helper()
		crtest.Eventually(t, gvk.Kind+" "+name+" gone", timeout, func(ctx context.Context) (bool, error) {
			_, err := crtest.Get(ctx, k8s, gvk, ns, name)
			return apierrors.IsNotFound(err), client.IgnoreNotFound(err)
		})
	}
	gone(depDbGVK, "brief")
	wantEvent(t, ns, "brief", rstatus.ReasonDependentsRemain)
	if _, err := crtest.Get(ctx, k8s, depAppGVK, ns, "brief-app"); err != nil {
		t.Fatalf("the app of the database deleted after its bound: %v", err)
	}

	// The app goes; its deletion wakes the database, which goes after it.
	if _, err := crtest.Get(ctx, k8s, depDbGVK, ns, "db"); err != nil {
		t.Fatalf("the database went before its app: %v", err)
	}
	if err := k8s.Delete(ctx, crtest.NewCR(depAppGVK, ns, "db-app", nil)); err != nil {
		t.Fatal(err)
	}
	gone(depAppGVK, "db-app")
	gone(depDbGVK, "db")
	if h := helmtest.History(t, cluster.Kubeconfig, ns, "db"); len(h) != 0 {
		t.Fatalf("the database's release is left:%s", describe(h))
	}
}

var (
	orderDbGVK  = schema.GroupVersionKind{Group: "test.rudder.dev", Version: "v1", Kind: "OrderDb"}
	orderAppGVK = schema.GroupVersionKind{Group: "test.rudder.dev", Version: "v1", Kind: "OrderApp"}
)

// TestDependsOnChartEdit: chart edits of both kinds upgrade the databases first, in the waves
// of the database kind's rollout policy (a first wave of one); each app's upgrade waits until
// its database is Ready on the new chart: the first wave's until its Deployment can roll out,
// the second wave's until the rollout reaches it. The kinds are the test's own, on chart
// volumes of their own, so that no other test sees the edits.
func TestDependsOnChartEdit(t *testing.T) {
	crtest.NeedsCluster(t)
	t.Parallel()
	ns := crtest.NewNamespace(t, k8s, "depedit-")
	key := "depedit.test.rudder.dev/" + ns
	t.Cleanup(func() { labelNode(t, key, nil) })
	// The rollout's first wave is the first database by rollout key.
	dbs := []string{"db-a", "db-b"} // not "y": the waited chart leaves the release name unquoted in its labels
	slices.SortFunc(dbs, func(a, b string) int { return strings.Compare(machine.RolloutKey(ns, a), machine.RolloutKey(ns, b)) })
	first, second := dbs[0], dbs[1]
	for _, db := range dbs {
		create(t, crtest.NewCR(orderDbGVK, ns, db, nil))
		app := crtest.NewCR(orderAppGVK, ns, "app-"+db, map[string]any{"message": "m"})
		app.SetAnnotations(map[string]string{watches.AnnotationDependsOn: "OrderDb/" + db})
		create(t, app)
	}
	for _, db := range dbs {
		waitReason(t, orderAppGVK, ns, "app-"+db, rstatus.TypeReady, metav1.ConditionTrue, rstatus.ReasonObjectsReady)
	}

	// The databases' chart now asks for a node label no node has yet; once rudder has loaded
	// it, the apps' chart changes too.
	dbVol, appVol := filepath.Join(chartDir, "orderdb"), filepath.Join(chartDir, "orderapp")
	t.Cleanup(func() { // for the next run of the test in this process (-count)
		_ = swapChart(dbVol, filepath.Join(chartDir, "waited"), nil)
		_ = swapChart(appVol, filepath.Join(chartDir, "widget"), nil)
	})
	before, _ := charts.Get(dbVol)
	values := "replicaCount: 1\nimage: {repository: nginx, tag: \"1\"}\nnodeSelector: {\"" + key + "\": \"yes\"}\n"
	if err := swapChart(dbVol, filepath.Join(chartDir, "waited"), map[string]string{"values.yaml": values}); err != nil {
		t.Fatal(err)
	}
	crtest.Eventually(t, "the databases' chart reloaded", timeout, func(context.Context) (bool, error) {
		now, _ := charts.Get(dbVol)
		return now.Current != nil && now.Current.Digest != before.Current.Digest, nil
	})
	tpl, err := os.ReadFile(filepath.Join(chartDir, "widget", "templates", "all.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	line := "message: {{ .Values.message | quote }}"
	edited := strings.Replace(string(tpl), line, line+"\n  edition: \"2\"", 1)
	if err := swapChart(appVol, filepath.Join(chartDir, "widget"), map[string]string{"templates/all.yaml": edited}); err != nil {
		t.Fatal(err)
	}
	waitsFor := func(app, why string) {
		t.Helper()
		crtest.Eventually(t, app+" waiting: "+why, timeout, func(ctx context.Context) (bool, error) {
			u, err := crtest.Get(ctx, k8s, orderAppGVK, ns, app)
			if err != nil {
				return false, err
			}
			c := crtest.Condition(u, rstatus.TypeReady)
			return c != nil && c.Reason == rstatus.ReasonDependencyNotReady && strings.Contains(c.Message, why), nil
		})
	}
	wantRevisions(t, ns, first, 2)
	waitsFor("app-"+first, "Ready=False")
	waitsFor("app-"+second, "its upgrade comes first")
	for _, name := range []string{second, "app-" + first, "app-" + second} {
		if got := releaseRevisions(t, ns, name); strings.Join(got, " ") != "1:deployed" {
			t.Fatalf("%s moved before the first wave's database was Ready on its new chart: %v", name, got)
		}
	}

	// The node gets the label: the first database is Ready, the rollout moves on to the second,
	// and each app is upgraded after its database.
	labelNode(t, key, new("yes"))
	for _, name := range []string{second, "app-" + first, "app-" + second} {
		wantRevisions(t, ns, name, 2)
	}
	for _, db := range dbs {
		waitReason(t, orderAppGVK, ns, "app-"+db, rstatus.TypeReady, metav1.ConditionTrue, rstatus.ReasonObjectsReady)
		dbAt, appAt := deployedAt(t, ns, db, 2), deployedAt(t, ns, "app-"+db, 2)
		if appAt.Before(dbAt) {
			t.Fatalf("app-%s's revision 2 (%s) came before its database's (%s)", db, appAt, dbAt)
		}
	}
}

// deployedAt is when revision of release name was deployed, as Helm recorded it.
func deployedAt(t *testing.T, ns, name string, revision int) time.Time {
	t.Helper()
	for _, r := range helmtest.History(t, cluster.Kubeconfig, ns, name) {
		if r.Version == revision {
			return r.Info.LastDeployed
		}
	}
	t.Fatalf("release %s has no revision %d", name, revision)
	return time.Time{}
}
