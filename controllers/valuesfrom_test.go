package controllers_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	rstatus "github.com/rudder-operator/rudder/api/status"
	"github.com/rudder-operator/rudder/internal/crtest"
	"github.com/rudder-operator/rudder/internal/helm/helmtest"
	"github.com/rudder-operator/rudder/internal/watches"
)

var (
	valuesProbeGVK  = schema.GroupVersionKind{Group: "test.rudder.dev", Version: "v1", Kind: "ValuesProbe"}
	valuesTenantGVK = schema.GroupVersionKind{Group: "test.rudder.dev", Version: "v1", Kind: "ValuesTenant"}
	valuesGizmoGVK  = schema.GroupVersionKind{Group: "test.rudder.dev", Version: "v1", Kind: "ValuesGizmo"}
)

// TestValuesFrom: the ValuesProbe watch reads a Secret's values.yaml, an optional ConfigMap,
// and an optional Secret key set at a targetPath, merged in that order under the spec. Each
// edit of a source gives one new revision; an unrelated Secret gives none; a missing source
// holds the CR until it exists; no other namespace can be named; no Secret value shows in an
// Event or a condition.
func TestValuesFrom(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ns := crtest.NewNamespace(t, k8s, "values-")
	db := secret(ns, "v-db", "values.yaml", "message: from-secret\nreplicas: 1\n")
	create(t, db)
	create(t, crtest.NewCR(valuesProbeGVK, ns, "v", map[string]any{}))
	crtest.WaitCondition(t, k8s, valuesProbeGVK, ns, "v", rstatus.TypeReady, metav1.ConditionTrue, "", timeout)
	waitMessage(t, ns, "v", "from-secret")

	// An unrelated Secret changes nothing; the source's edit upgrades once.
	other := secret(ns, "unrelated", "values.yaml", "message: not-read\n")
	create(t, other)
	other.Data["values.yaml"] = []byte("message: still-not-read\n")
	update(t, other)
	db.Data["values.yaml"] = []byte("message: edited\nreplicas: 1\n")
	update(t, db)
	waitMessage(t, ns, "v", "edited")
	wantRevisions(t, ns, "v", 2)

	// The optional ConfigMap, once it exists, goes on top of the Secret.
	opt := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "v-opt", Annotations: claims("v-opt")}, Data: map[string]string{"values.yaml": "replicas: 2\n"}}
	create(t, opt)
	waitReplicas(t, ns, "v", 2)
	wantRevisions(t, ns, "v", 3)
	opt.Data["values.yaml"] = "replicas: 3\n"
	update(t, opt)
	waitReplicas(t, ns, "v", 3)
	wantRevisions(t, ns, "v", 4)
	// A key set at a targetPath, as a string; then the spec, which wins over every source.
	create(t, secret(ns, "v-msg", "message", "via-target"))
	waitMessage(t, ns, "v", "via-target")
	patch(t, valuesProbeGVK, ns, "v", `{"spec":{"message":"from-spec"}}`)
	waitMessage(t, ns, "v", "from-spec")
	wantRevisions(t, ns, "v", 6)

	// A missing source holds the CR back, naming it, until it exists.
	create(t, crtest.NewCR(valuesProbeGVK, ns, "m", map[string]any{}))
	u := crtest.WaitCondition(t, k8s, valuesProbeGVK, ns, "m", rstatus.TypeReady, metav1.ConditionFalse, rstatus.ReasonValuesFromMissing, timeout)
	if msg := crtest.Condition(u, rstatus.TypeReady).Message; !strings.Contains(msg, "Secret "+ns+"/m-db") {
		t.Fatalf("the condition does not name the source: %s", msg)
	}
	create(t, secret(ns, "m-db", "values.yaml", "message: arrived\n"))
	crtest.WaitCondition(t, k8s, valuesProbeGVK, ns, "m", rstatus.TypeReady, metav1.ConditionTrue, "", timeout)
	waitMessage(t, ns, "m", "arrived")

	// A name can only be one of the CR's namespace.
	x := crtest.NewCR(valuesProbeGVK, ns, "x", map[string]any{})
	x.SetAnnotations(map[string]string{"db": "kube-system/x"})
	create(t, x)
	u = crtest.WaitCondition(t, k8s, valuesProbeGVK, ns, "x", rstatus.TypeStalled, metav1.ConditionTrue, rstatus.ReasonValuesInvalid, timeout)
	if msg := crtest.Condition(u, rstatus.TypeStalled).Message; !strings.Contains(msg, "valuesFrom[0].name") {
		t.Fatalf("the condition does not name the field: %s", msg)
	}

	// A CR named after a Secret not meant for it (the CR author picks the name, so the
	// Secret) gets none of it until the Secret says it is meant for that CR.
	payments := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "payments-db"},
		Data: map[string][]byte{"values.yaml": []byte("message: payments-password\n")}}
	create(t, payments)
	create(t, crtest.NewCR(valuesProbeGVK, ns, "payments", map[string]any{}))
	u = crtest.WaitCondition(t, k8s, valuesProbeGVK, ns, "payments", rstatus.TypeStalled, metav1.ConditionTrue, rstatus.ReasonValuesFromUnclaimed, timeout)
	if msg := crtest.Condition(u, rstatus.TypeStalled).Message; !strings.Contains(msg, "ValuesProbe.test.rudder.dev/payments") || strings.Contains(msg, "payments-password") {
		t.Fatalf("the condition does not name the CR the Secret must claim (or shows its value): %s", msg)
	}
	if h := helmtest.History(t, cluster.Kubeconfig, ns, "payments"); len(h) != 0 {
		t.Fatalf("a release of an unclaimed source: %s", describe(h))
	}
	payments.Annotations = claims("payments-db")
	update(t, payments)
	crtest.WaitCondition(t, k8s, valuesProbeGVK, ns, "payments", rstatus.TypeReady, metav1.ConditionTrue, "", timeout)

	// Secret values are in the release's values (a Secret of Helm's), never in what anyone
	// may read of the CR.
	var evs corev1.EventList
	if err := k8s.List(ctx, &evs, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	for _, e := range evs.Items {
		if strings.Contains(e.Message, "via-target") || strings.Contains(e.Message, "arrived") || strings.Contains(e.Message, "payments-password") {
			t.Fatalf("an Event shows a Secret's value: %s", e.Message)
		}
	}
}

// TestValuesFromWithAChartEdit: a source edit and a chart edit made together give one
// upgrade, in either order, not one each.
func TestValuesFromWithAChartEdit(t *testing.T) {
	t.Parallel()
	ns := crtest.NewNamespace(t, k8s, "valuesc-")
	db := secret(ns, "g-db", "values.yaml", "message: one\n")
	create(t, db)
	create(t, crtest.NewCR(valuesGizmoGVK, ns, "g", map[string]any{}))
	crtest.WaitCondition(t, k8s, valuesGizmoGVK, ns, "g", rstatus.TypeReady, metav1.ConditionTrue, "", timeout)
	waitMessage(t, ns, "g", "one")
	vol, src := filepath.Join(chartDir, "valuesgizmo"), filepath.Join(chartDir, "widget")
	tpl, err := os.ReadFile(filepath.Join(src, "templates", "all.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	publish := func(n string) error {
		edited := strings.Replace(string(tpl), "message: {{ .Values.message | quote }}",
			"message: {{ .Values.message | quote }}\n  edition: \""+n+"\"", 1)
		return swapChart(vol, src, map[string]string{"templates/all.yaml": edited})
	}
	edition := func(n string) {
		t.Helper()
		if err := publish(n); err != nil {
			t.Fatal(err)
		}
	}
	waitBoth := func(message, edition string) {
		t.Helper()
		crtest.Eventually(t, "ConfigMap g with message "+message+" and edition "+edition, timeout, func(ctx context.Context) (bool, error) {
			var cm corev1.ConfigMap
			err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "g"}, &cm)
			return err == nil && cm.Data["message"] == message && cm.Data["edition"] == edition, client.IgnoreNotFound(err)
		})
	}

	// The source first, then the chart.
	db.Data["values.yaml"] = []byte("message: two\n")
	update(t, db)
	edition("2")
	waitBoth("two", "2")
	wantRevisions(t, ns, "g", 2)
	// The chart first, then the source. "Together" is within the chart's quiet period; so that
	// a slow API server cannot stretch the two apart, the chart is kept changing until rudder
	// has seen the source's change, and only then left quiet.
	label := map[string]string{"gvk": "ValuesGizmo.test.rudder.dev/v1"}
	seen := crtest.Metric(t, "rudder_values_source_changes_total", label)
	quiet := keepEditing(t, func() error { return publish("3") })
	db.Data["values.yaml"] = []byte("message: three\n")
	update(t, db)
	crtest.Eventually(t, "rudder to see the source's change", timeout, func(context.Context) (bool, error) {
		return crtest.Metric(t, "rudder_values_source_changes_total", label) > seen, nil
	})
	quiet()
	waitBoth("three", "3")
	wantRevisions(t, ns, "g", 3)
}

// TestValuesFromAsTenant: an impersonating watch reads its sources as the tenant: one whose
// Role has no Secrets gets Forbidden naming them, and nothing of rudder's own rights is used.
func TestValuesFromAsTenant(t *testing.T) {
	t.Parallel()
	ns := crtest.NewNamespace(t, k8s, "valuest-")
	create(t, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "deployer"}})
	create(t, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "deployer"}, Rules: []rbacv1.PolicyRule{{
		APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"*"}}}})
	create(t, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "deployer"},
		RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: "deployer"},
		Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: "deployer", Namespace: ns}}})
	create(t, secret(ns, "t-db", "values.yaml", "message: hidden\n"))
	create(t, crtest.NewCR(valuesTenantGVK, ns, "t", map[string]any{}))
	u := crtest.WaitCondition(t, k8s, valuesTenantGVK, ns, "t", rstatus.TypeReleased, metav1.ConditionFalse, rstatus.ReasonForbidden, timeout)
	msg := crtest.Condition(u, rstatus.TypeReleased).Message
	for _, want := range []string{"system:serviceaccount:" + ns + ":deployer", `resource "secrets"`, "Secret " + ns + "/t-db"} {
		if !strings.Contains(msg, want) {
			t.Fatalf("the condition does not name %q: %s", want, msg)
		}
	}
}

// keepEditing runs edit now and then every 50 ms, well inside the chart's quiet period, until
// the function it returns is called, which waits for the last edit.
func keepEditing(t *testing.T, edit func() error) func() {
	t.Helper()
	if err := edit(); err != nil {
		t.Fatal(err)
	}
	stop, done := make(chan struct{}), make(chan error, 1)
	go func() {
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				done <- nil
				return
			case <-tick.C:
				if err := edit(); err != nil {
					done <- err
					return
				}
			}
		}
	}()
	return func() {
		t.Helper()
		close(stop)
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
}

func secret(ns, name, key, content string) *corev1.Secret {
	return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Annotations: claims(name)},
		Data: map[string][]byte{key: []byte(content)}}
}

// claims says that a source named "<cr>-…" is meant for the CRs of that name of the
// valuesFrom test kinds, whose watches name their sources after the CR.
func claims(name string) map[string]string {
	cr, _, _ := strings.Cut(name, "-")
	var refs []string
	for _, gvk := range []schema.GroupVersionKind{valuesProbeGVK, valuesTenantGVK, valuesGizmoGVK} {
		refs = append(refs, gvk.Kind+"."+gvk.Group+"/"+cr)
	}
	return map[string]string{watches.AnnotationValuesFor: strings.Join(refs, ",")}
}

func create(t *testing.T, o client.Object) {
	t.Helper()
	if err := k8s.Create(context.Background(), o); err != nil {
		t.Fatal(err)
	}
}

func update(t *testing.T, o client.Object) {
	t.Helper()
	if err := k8s.Update(context.Background(), o); err != nil {
		t.Fatal(err)
	}
}

// waitReplicas waits for the widget chart's Deployment to have replicas.
func waitReplicas(t *testing.T, ns, name string, replicas int32) {
	t.Helper()
	crtest.Eventually(t, fmt.Sprintf("Deployment %s with %d replicas", name, replicas), timeout, func(ctx context.Context) (bool, error) {
		var d appsv1.Deployment
		err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &d)
		return err == nil && d.Spec.Replicas != nil && *d.Spec.Replicas == replicas, client.IgnoreNotFound(err)
	})
}

// waitMessage waits for the widget chart's ConfigMap to carry message.
func waitMessage(t *testing.T, ns, name, message string) {
	t.Helper()
	crtest.Eventually(t, "ConfigMap "+name+" with message "+message, timeout, func(ctx context.Context) (bool, error) {
		var cm corev1.ConfigMap
		err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &cm)
		return err == nil && cm.Data["message"] == message, client.IgnoreNotFound(err)
	})
}

// wantRevisions waits for the release's revision n to be deployed, and checks that it is the
// newest: one revision per change, not two.
func wantRevisions(t *testing.T, ns, name string, n int) {
	t.Helper()
	crtest.Eventually(t, fmt.Sprintf("revision %d of %s deployed", n, name), timeout, func(context.Context) (bool, error) {
		got := releaseRevisions(t, ns, name)
		if len(got) > n {
			return false, fmt.Errorf("history %v: more than %d revisions:%s", got, n, describe(helmtest.History(t, cluster.Kubeconfig, ns, name)))
		}
		return len(got) == n && slices.Contains(got, strconv.Itoa(n)+":deployed"), nil
	})
}
