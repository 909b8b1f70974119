package machine

import (
	"context"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"testing"
	"unsafe"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
)

func TestCompact(t *testing.T) {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": "a", "managedFields": []any{map[string]any{"manager": "x"}}, "labels": map[string]any{"k": "v"}},
		"data":     map[string]any{"k": "v"},
	}}
	if _, err := Compact(u); err != nil {
		t.Fatal(err)
	}
	if _, found, _ := unstructured.NestedFieldNoCopy(u.Object, "metadata", "managedFields"); found {
		t.Error("unstructured: managedFields kept")
	}
	if u.GetName() != "a" || u.GetLabels()["k"] != "v" || u.Object["data"] == nil {
		t.Errorf("unstructured: more than managedFields removed: %v", u.Object)
	}

	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "b", ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "x"}}}}
	if _, err := Compact(cm); err != nil {
		t.Fatal(err)
	}
	if cm.ManagedFields != nil || cm.Name != "b" {
		t.Errorf("typed: %+v", cm.ObjectMeta)
	}
	// Anything else (a tombstone, say) passes through untouched.
	if out, err := Compact("x"); err != nil || out != "x" {
		t.Errorf("other: %v %v", out, err)
	}
}

// What two cached objects both hold (a key of their JSON, a label, the namespace) is kept
// once: Compact interns it.
func TestCompactSharesRepeatedStrings(t *testing.T) {
	decode := func(raw string) *unstructured.Unstructured {
		u := &unstructured.Unstructured{}
		if err := u.UnmarshalJSON([]byte(raw)); err != nil {
			t.Fatal(err)
		}
		if _, err := Compact(u); err != nil {
			t.Fatal(err)
		}
		return u
	}
	const cr = `{"apiVersion":"x.dev/v1","kind":"Web","metadata":{"name":"%s","namespace":"team-a","labels":{"tier":"web"}},"status":{"conditions":[{"type":"Ready","status":"True"}]}}`
	a, b := decode(fmt.Sprintf(cr, "a")), decode(fmt.Sprintf(cr, "b"))
	same := func(x, y string) bool { return unsafe.StringData(x) == unsafe.StringData(y) }
	if !same(a.GetNamespace(), b.GetNamespace()) || !same(a.GetLabels()["tier"], b.GetLabels()["tier"]) {
		t.Error("unstructured: the namespace or a label value is kept twice")
	}
	ready := func(u *unstructured.Unstructured) map[string]any {
		return u.Object["status"].(map[string]any)["conditions"].([]any)[0].(map[string]any)
	}
	for k := range ready(a) {
		for k2 := range ready(b) {
			if k == k2 && !same(k, k2) {
				t.Errorf("unstructured: the key %q is kept twice", k)
			}
		}
	}

	typed := func() *corev1.Secret {
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: strings.Clone("team-a"), Labels: map[string]string{strings.Clone("owner"): strings.Clone("helm")}}}
		if _, err := Compact(s); err != nil {
			t.Fatal(err)
		}
		return s
	}
	x, y := typed(), typed()
	if !same(x.Namespace, y.Namespace) || !same(x.Labels["owner"], y.Labels["owner"]) {
		t.Error("typed: the namespace or a label value is kept twice")
	}
}

// The operand cache keeps metadata (without managedFields and owner references), kstatus's
// verdict on the whole object, and the status only when hooks read it; it drops specs, pod
// templates and payloads. A second application keeps the first verdict.
func TestOperandTransform(t *testing.T) {
	t.Parallel()
	deployment := func() *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "apps/v1", "kind": "Deployment",
			"metadata": map[string]any{"name": "d", "generation": int64(3), "labels": map[string]any{"a": "b"},
				"managedFields":   []any{map[string]any{"manager": "x"}},
				"ownerReferences": []any{map[string]any{"kind": "Web", "name": "d"}}},
			"spec": map[string]any{"replicas": int64(2), "template": map[string]any{"spec": map[string]any{"containers": []any{}}}},
			"status": map[string]any{"observedGeneration": int64(3), "replicas": int64(2), "updatedReplicas": int64(2),
				"readyReplicas": int64(2), "availableReplicas": int64(1)},
		}}
	}
	for _, keep := range []bool{false, true} {
		dep := deployment()
		if _, err := OperandTransform(keep, nil)(dep); err != nil {
			t.Fatal(err)
		}
		verdict, msg, err := operandStatus(dep)
		if err != nil || verdict != status.InProgressStatus || !strings.Contains(msg, "Available: 1/2") {
			t.Errorf("keep status %v: verdict %q %q %v", keep, verdict, msg, err)
		}
		if _, found := dep.Object["spec"]; found {
			t.Errorf("keep status %v: spec kept", keep)
		}
		if _, found := dep.Object["status"]; found != keep {
			t.Errorf("keep status %v: status kept %v", keep, found)
		}
		if dep.GetGeneration() != 3 || dep.GetLabels()["a"] != "b" || len(dep.GetManagedFields()) != 0 || len(dep.GetOwnerReferences()) != 0 {
			t.Errorf("keep status %v: metadata %v", keep, dep.Object["metadata"])
		}
		// Applied again (the object is already transformed): the verdict is not recomputed
		// from what is left.
		if _, err := OperandTransform(keep, nil)(dep); err != nil {
			t.Fatal(err)
		}
		if verdict, _, _ := operandStatus(dep); verdict != status.InProgressStatus {
			t.Errorf("keep status %v: second application changed the verdict to %q", keep, verdict)
		}
	}

	cm := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": "c"}, "data": map[string]any{"k": "v"}}}
	if _, err := OperandTransform(false, nil)(cm); err != nil {
		t.Fatal(err)
	}
	if _, found := cm.Object["data"]; found {
		t.Error("ConfigMap data kept")
	}
	if verdict, _, err := operandStatus(cm); verdict != status.CurrentStatus || err != nil {
		t.Errorf("ConfigMap verdict %q %v", verdict, err)
	}

	// A status kstatus cannot read fails the pass that reads it, with kstatus's error.
	bad := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "apps/v1", "kind": "Deployment",
		"metadata": map[string]any{"name": "b", "generation": int64(1)}, "status": map[string]any{"conditions": "not a list"}}}
	if _, err := OperandTransform(false, nil)(bad); err != nil {
		t.Fatal(err)
	}
	if _, _, err := operandStatus(bad); err == nil {
		t.Error("a malformed status gave a verdict")
	}

	// An object read from the API server (no dependent watch) gets its verdict computed.
	if verdict, _, err := operandStatus(deployment()); verdict != status.InProgressStatus || err != nil {
		t.Errorf("uncached verdict %q %v", verdict, err)
	}
}

// Kubernetes' own kinds are cached typed (their informers speak protobuf): the same verdict
// as the unstructured object gets, kept in annotations that readers never see; the same
// metadata; no spec; the status only when hooks read it.
func TestTypedOperandTransform(t *testing.T) {
	t.Parallel()
	if _, ok := OperandObject(appsv1.SchemeGroupVersion.WithKind("Deployment")).(*appsv1.Deployment); !ok {
		t.Error("Deployments are not cached typed")
	}
	if _, ok := OperandObject(schema.GroupVersionKind{Group: "bench.rudder.dev", Version: "v1", Kind: "Scale"}).(*unstructured.Unstructured); !ok {
		t.Error("a custom resource is not cached unstructured")
	}
	deployment := func() (*unstructured.Unstructured, *appsv1.Deployment) {
		u := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "apps/v1", "kind": "Deployment",
			"metadata": map[string]any{"name": "d", "generation": int64(3), "labels": map[string]any{"a": "b"},
				"annotations":     map[string]any{"rudder.dev/owner": "x"},
				"managedFields":   []any{map[string]any{"manager": "x"}},
				"ownerReferences": []any{map[string]any{"apiVersion": "v1", "kind": "Web", "name": "d", "uid": "u"}}},
			"spec": map[string]any{"replicas": int64(2), "template": map[string]any{"spec": map[string]any{"containers": []any{}}}},
			"status": map[string]any{"observedGeneration": int64(3), "replicas": int64(2), "updatedReplicas": int64(2),
				"readyReplicas": int64(2), "availableReplicas": int64(1)},
		}}
		d := &appsv1.Deployment{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, d); err != nil {
			t.Fatal(err)
		}
		d.TypeMeta = metav1.TypeMeta{} // as informers deliver them
		return u, d
	}
	for _, keep := range []bool{false, true} {
		u, d := deployment()
		if _, err := OperandTransform(keep, nil)(u); err != nil {
			t.Fatal(err)
		}
		wantVerdict, wantMsg, _ := operandStatus(u)
		out, err := OperandTransform(keep, nil)(d)
		if err != nil {
			t.Fatal(err)
		}
		dep := out.(*appsv1.Deployment)
		if verdict, msg, err := operandStatus(dep); verdict != wantVerdict || msg != wantMsg || err != nil || verdict == "" {
			t.Errorf("keep status %v: verdict %q %q %v, want %q %q", keep, verdict, msg, err, wantVerdict, wantMsg)
		}
		if !reflect.DeepEqual(dep.Spec, appsv1.DeploymentSpec{}) {
			t.Errorf("keep status %v: spec kept: %+v", keep, dep.Spec)
		}
		if kept := dep.Status.Replicas == 2; kept != keep {
			t.Errorf("keep status %v: status kept %v", keep, kept)
		}
		if dep.Kind != "Deployment" || dep.Generation != 3 || dep.Labels["a"] != "b" || dep.ManagedFields != nil || dep.OwnerReferences != nil {
			t.Errorf("keep status %v: metadata %+v %+v", keep, dep.TypeMeta, dep.ObjectMeta)
		}
		if again, _ := OperandTransform(keep, nil)(dep); again != out {
			t.Errorf("keep status %v: a second application changed the object", keep)
		}
		// Readers get the object without the verdict, typed or unstructured, and the cached
		// copy keeps it.
		typed, uns := &appsv1.Deployment{}, &unstructured.Unstructured{}
		if err := convertOperand(dep, typed); err != nil {
			t.Fatal(err)
		}
		if err := convertOperand(dep, uns); err != nil {
			t.Fatal(err)
		}
		want := map[string]string{"rudder.dev/owner": "x"}
		if !maps.Equal(typed.Annotations, want) || !maps.Equal(uns.GetAnnotations(), want) || uns.GetLabels()["a"] != "b" {
			t.Errorf("keep status %v: read annotations %v and %v, want %v", keep, typed.Annotations, uns.GetAnnotations(), want)
		}
		if _, cached := dep.Annotations[kstatusKey]; !cached {
			t.Errorf("keep status %v: reading removed the cached verdict", keep)
		}
		plain, other := dep.DeepCopy(), dep.DeepCopy()
		plain.Annotations, other.Annotations = want, map[string]string{"rudder.dev/owner": "y"}
		if len(changedMetadata(dep, plain)) != 0 || !slices.Equal(changedMetadata(dep, other), []string{"a=rudder.dev/owner"}) {
			t.Errorf("keep status %v: a verdict is taken for a change of annotations, or a change is not", keep)
		}
	}
}

// Hooks read operands from the operand cache in either form, and never see the verdict.
func TestOperandReader(t *testing.T) {
	t.Parallel()
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "d", Namespace: "n", Labels: map[string]string{"a": "b"}},
		Spec: appsv1.DeploymentSpec{Replicas: new(int32(1))}}
	cached := typedOperand(d, true, nil)
	c := fake.NewClientBuilder().WithScheme(clientgoscheme.Scheme).WithObjects(cached).Build()
	r := operandReader{r: c, scheme: clientgoscheme.Scheme}
	ctx, key := context.Background(), client.ObjectKey{Namespace: "n", Name: "d"}
	uns := &unstructured.Unstructured{}
	uns.SetGroupVersionKind(appsv1.SchemeGroupVersion.WithKind("Deployment"))
	ulist := &unstructured.UnstructuredList{}
	ulist.SetGroupVersionKind(appsv1.SchemeGroupVersion.WithKind("DeploymentList"))
	typed, tlist := &appsv1.Deployment{}, &appsv1.DeploymentList{}
	for _, err := range []error{r.Get(ctx, key, typed), r.Get(ctx, key, uns), r.List(ctx, tlist), r.List(ctx, ulist)} {
		if err != nil {
			t.Fatal(err)
		}
	}
	if len(tlist.Items) != 1 || len(ulist.Items) != 1 {
		t.Fatalf("listed %d and %d objects, want 1", len(tlist.Items), len(ulist.Items))
	}
	for i, o := range []client.Object{typed, uns, &tlist.Items[0], &ulist.Items[0]} {
		if o.GetName() != "d" || o.GetLabels()["a"] != "b" || o.GetAnnotations() != nil {
			t.Errorf("read %d: %s, labels %v, annotations %v", i, o.GetName(), o.GetLabels(), o.GetAnnotations())
		}
	}
	again := &appsv1.Deployment{}
	if err := c.Get(ctx, key, again); err != nil || again.Annotations[kstatusKey] == "" {
		t.Errorf("the cached verdict is gone: %v %v", again.Annotations, err)
	}
}

// kstatus is given only what it reads of a typed object: its verdicts are those on the whole
// object, for every kind it has rules for.
func TestTypedVerdict(t *testing.T) {
	t.Parallel()
	now := metav1.Now()
	meta := metav1.ObjectMeta{Name: "o", Generation: 2, CreationTimestamp: now}
	replicas, partition := int32(3), int32(1)
	for _, obj := range []client.Object{
		&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "o", Generation: 2, DeletionTimestamp: &now}},
		&appsv1.Deployment{ObjectMeta: meta, Spec: appsv1.DeploymentSpec{Replicas: &replicas},
			Status: appsv1.DeploymentStatus{ObservedGeneration: 2, Replicas: 3, UpdatedReplicas: 3, ReadyReplicas: 3, AvailableReplicas: 3,
				Conditions: []appsv1.DeploymentCondition{{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionTrue, Reason: "NewReplicaSetAvailable"},
					{Type: appsv1.DeploymentAvailable, Status: corev1.ConditionTrue}}}},
		&appsv1.StatefulSet{ObjectMeta: meta, Spec: appsv1.StatefulSetSpec{Replicas: &replicas,
			UpdateStrategy: appsv1.StatefulSetUpdateStrategy{Type: appsv1.RollingUpdateStatefulSetStrategyType,
				RollingUpdate: &appsv1.RollingUpdateStatefulSetStrategy{Partition: &partition}}},
			Status: appsv1.StatefulSetStatus{ObservedGeneration: 2, Replicas: 3, ReadyReplicas: 3, CurrentReplicas: 3, UpdatedReplicas: 2}},
		&corev1.Pod{ObjectMeta: meta, Status: corev1.PodStatus{Phase: corev1.PodPending}},
		&corev1.Pod{ObjectMeta: meta, Status: corev1.PodStatus{Phase: corev1.PodRunning,
			Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}}},
		&corev1.Service{ObjectMeta: meta, Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer}},
		&corev1.ConfigMap{ObjectMeta: meta, Data: map[string]string{"k": "v"}},
	} {
		gvk, err := apiutil.GVKForObject(obj, clientgoscheme.Scheme)
		if err != nil {
			t.Fatal(err)
		}
		obj.GetObjectKind().SetGroupVersionKind(gvk)
		m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
		if err != nil {
			t.Fatal(err)
		}
		wantVerdict, wantMsg, wantErr := operandStatus(&unstructured.Unstructured{Object: m})
		verdict, msg := typedVerdict(obj)
		if string(wantVerdict) != verdict || wantMsg != msg || wantErr != nil {
			t.Errorf("%s: verdict %q %q, want %q %q %v", gvk.Kind, verdict, msg, wantVerdict, wantMsg, wantErr)
		}
	}
}

// TestJudgedKindsKeepTheirFields: the objects of a kind a watch's healthChecks judge keep spec
// and status in the operand cache (the expressions read them), typed or not; others do not.
func TestJudgedKindsKeepTheirFields(t *testing.T) {
	db := schema.GroupVersionKind{Group: "db.example.com", Version: "v1", Kind: "Database"}
	judged := map[schema.GroupVersionKind]bool{db: true, appsv1.SchemeGroupVersion.WithKind("Deployment"): true}
	u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "db.example.com/v1", "kind": "Database",
		"metadata": map[string]any{"name": "d", "managedFields": []any{map[string]any{"manager": "x"}}},
		"spec":     map[string]any{"size": "1Gi"}, "status": map[string]any{"phase": "Running"}}}
	if _, err := OperandTransform(false, judged)(u); err != nil {
		t.Fatal(err)
	}
	if u.Object["spec"] == nil || u.Object["status"] == nil || len(u.GetManagedFields()) != 0 {
		t.Errorf("a judged kind's object as cached: %v", u.Object)
	}
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "d"}, Spec: appsv1.DeploymentSpec{Replicas: new(int32(3))},
		Status: appsv1.DeploymentStatus{ReadyReplicas: 2}}
	d.SetGroupVersionKind(appsv1.SchemeGroupVersion.WithKind("Deployment"))
	out := typedOperand(d, false, judged).(*appsv1.Deployment)
	if out.Spec.Replicas == nil || out.Status.ReadyReplicas != 2 {
		t.Errorf("a judged typed kind lost its spec or status: %+v", out)
	}
	if plain := typedOperand(d.DeepCopy(), false, nil).(*appsv1.Deployment); plain.Spec.Replicas != nil || plain.Status.ReadyReplicas != 0 {
		t.Errorf("an unjudged kind kept its spec or status: %+v", plain)
	}
}
