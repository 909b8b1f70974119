package helm

import (
	"context"
	"reflect"
	"slices"
	"testing"

	"github.com/rudder-operator/rudder/internal/guard/guardtest"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
)

// Drift re-apply: a deleted object is recreated, a field the manifest sets is reverted, a field
// someone else added stays, and an object as the manifest says is not written.
func TestReapply(t *testing.T) {
	ctx := context.Background()
	manifest := func(name, msg string) *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
			"metadata": map[string]any{"name": name, "namespace": "ns"}, "data": map[string]any{"message": msg}}}
		return u
	}
	c := fake.NewClientBuilder().WithScheme(scheme.Scheme).WithObjects(
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "edited", Namespace: "ns"},
			Data: map[string]string{"message": "tampered", "extra": "someone else's"}},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "same", Namespace: "ns"}, Data: map[string]string{"message": "m"}},
	).Build()
	same := &corev1.ConfigMap{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: "ns", Name: "same"}, same); err != nil {
		t.Fatal(err)
	}

	restored, drifted, err := Reapply(ctx, []*unstructured.Unstructured{manifest("gone", "g"), manifest("edited", "e"), manifest("same", "m")}, c, c, Drift{})
	if err != nil || drifted != nil {
		t.Fatal(err)
	}
	if want := []string{"ConfigMap/ns/gone (recreated)", "ConfigMap/ns/edited (reverted)"}; !slices.Equal(restored, want) {
		t.Errorf("restored %q, want %q", restored, want)
	}
	var cm corev1.ConfigMap
	if err := c.Get(ctx, client.ObjectKey{Namespace: "ns", Name: "gone"}, &cm); err != nil || cm.Data["message"] != "g" {
		t.Errorf("recreated: %v %v", err, cm.Data)
	}
	if err := c.Get(ctx, client.ObjectKey{Namespace: "ns", Name: "edited"}, &cm); err != nil ||
		cm.Data["message"] != "e" || cm.Data["extra"] != "someone else's" {
		t.Errorf("reverted: %v %v", err, cm.Data)
	}
	if err := c.Get(ctx, client.ObjectKey{Namespace: "ns", Name: "same"}, &cm); err != nil || cm.ResourceVersion != same.ResourceVersion {
		t.Errorf("an unchanged object was written: %v, resourceVersion %s → %s", err, same.ResourceVersion, cm.ResourceVersion)
	}
}

// driftDeployment is a Deployment of a manifest with one container.
func driftDeployment(replicas int64, image string) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{"apiVersion": "apps/v1", "kind": "Deployment",
		"metadata": map[string]any{"name": "web", "namespace": "ns"},
		"spec": map[string]any{"replicas": replicas, "selector": map[string]any{"matchLabels": map[string]any{"app": "web"}},
			"template": map[string]any{"metadata": map[string]any{"labels": map[string]any{"app": "web"}},
				"spec": map[string]any{"containers": []any{map[string]any{"name": "app", "image": image}}}}}}}
}

// Ignored fields are neither restored nor reported, the others are restored; in warn mode
// nothing is written and the drift names each field (a list element by its position in the
// manifest, matched by name) and each missing object.
func TestReapplyDriftPolicy(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name         string
		d            Drift
		wantReplicas int64
		wantImage    string
		wantDrift    []string
	}{
		{"ignore replicas", Drift{Ignored: func(*unstructured.Unstructured) []string { return []string{"/spec/replicas"} }}, 5, "nginx:1", nil},
		{"restore all", Drift{}, 1, "nginx:1", nil},
		{"warn", Drift{Warn: true}, 5, "nginx:2", []string{
			"Deployment/ns/web /spec/replicas, /spec/template/spec/containers/0/image", "ConfigMap/ns/gone (missing)"}},
		{"warn, ignore replicas", Drift{Warn: true, Ignored: func(*unstructured.Unstructured) []string { return []string{"/spec/replicas", "/no/such"} }}, 5, "nginx:2", []string{
			"Deployment/ns/web /spec/template/spec/containers/0/image", "ConfigMap/ns/gone (missing)"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			live := driftDeployment(5, "nginx:2")
			// A sidecar a webhook injected before the app container: matched by name.
			spec := live.Object["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)
			spec["containers"] = append([]any{map[string]any{"name": "sidecar", "image": "proxy"}}, spec["containers"].([]any)...)
			c := fake.NewClientBuilder().WithScheme(scheme.Scheme).WithObjects(live).Build()
			gone := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
				"metadata": map[string]any{"name": "gone", "namespace": "ns"}}}
			_, drifted, err := Reapply(ctx, []*unstructured.Unstructured{driftDeployment(1, "nginx:1"), gone}, c, c, tc.d)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, d := range drifted {
				got = append(got, d.String())
			}
			if !slices.Equal(got, tc.wantDrift) {
				t.Errorf("drift %q, want %q", got, tc.wantDrift)
			}
			dep := &unstructured.Unstructured{}
			dep.SetGroupVersionKind(schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"})
			if err := c.Get(ctx, client.ObjectKey{Namespace: "ns", Name: "web"}, dep); err != nil {
				t.Fatal(err)
			}
			replicas, _, _ := unstructured.NestedInt64(dep.Object, "spec", "replicas")
			containers, _, _ := unstructured.NestedSlice(dep.Object, "spec", "template", "spec", "containers")
			images := map[string]any{}
			for _, ct := range containers {
				images[ct.(map[string]any)["name"].(string)] = ct.(map[string]any)["image"]
			}
			if replicas != tc.wantReplicas || images["app"] != tc.wantImage || images["sidecar"] != "proxy" {
				t.Errorf("replicas %d, images %v; want %d and app %s, with the sidecar kept", replicas, images, tc.wantReplicas, tc.wantImage)
			}
			err = c.Get(ctx, client.ObjectKey{Namespace: "ns", Name: "gone"}, &corev1.ConfigMap{})
			if created := err == nil; created == tc.d.Warn {
				t.Errorf("missing object recreated: %v (warn mode %v)", created, tc.d.Warn)
			}
		})
	}
}

// What a server-side restore applies: the manifest with Helm's ownership metadata (dropping it
// would let the apply remove it), an ignored field as it is live (dropping it would let the
// apply reset it), and an ignored field the live object lacks left out. (The fake client
// cannot dry-run an apply: the restore itself is tested on the control plane,
// controllers.TestServerSideApplyWatch.)
func TestServerSideRestoreKeepsIgnoredFieldsLive(t *testing.T) {
	d := Drift{ServerSide: true, Release: "web", Namespace: "ns",
		Ignored: func(*unstructured.Unstructured) []string { return []string{"/spec/replicas", "/spec/paused"} }}
	want := driftDeployment(1, "nginx:1")
	want.Object["spec"].(map[string]any)["paused"] = true
	live := driftDeployment(5, "nginx:2")
	got := d.applied(want, live)
	if r, _, _ := unstructured.NestedInt64(got.Object, "spec", "replicas"); r != 5 {
		t.Errorf("replicas %d, want the live 5", r)
	}
	if _, ok, _ := unstructured.NestedFieldNoCopy(got.Object, "spec", "paused"); ok {
		t.Error("an ignored field the live object lacks is applied")
	}
	if c, _, _ := unstructured.NestedSlice(got.Object, "spec", "template", "spec", "containers"); c[0].(map[string]any)["image"] != "nginx:1" {
		t.Errorf("the image is not the manifest's: %v", c)
	}
	if got.GetLabels()["app.kubernetes.io/managed-by"] != "Helm" || got.GetAnnotations()["meta.helm.sh/release-name"] != "web" ||
		got.GetAnnotations()["meta.helm.sh/release-namespace"] != "ns" {
		t.Errorf("Helm's ownership metadata is missing: %v %v", got.GetLabels(), got.GetAnnotations())
	}
	if r, _, _ := unstructured.NestedInt64(want.Object, "spec", "replicas"); r != 1 || want.GetLabels() != nil {
		t.Error("the manifest's object was changed")
	}
}

func TestCheckPointer(t *testing.T) {
	for p, ok := range map[string]bool{"/spec/replicas": true, "/metadata/annotations/a~1b": true, "spec": false, "/": false, "/a~2": false, "/a~": false} {
		if err := CheckPointer(p); (err == nil) != ok {
			t.Errorf("CheckPointer(%q) = %v", p, err)
		}
	}
	obj := map[string]any{"metadata": map[string]any{"annotations": map[string]any{"a/b": "x", "c": "y"}}, "l": []any{"0", "1", "2"},
		"top": "x", "m": []any{[]any{"a", "b"}}}
	removePointer(obj, "/metadata/annotations/a~1b")
	removePointer(obj, "/l/1")
	removePointer(obj, "/l/9")
	removePointer(obj, "/top")
	removePointer(obj, "/m/0/0")
	removePointer(obj, "/missing/x")
	removePointer(obj, "/l/0/x")
	want := map[string]any{"metadata": map[string]any{"annotations": map[string]any{"c": "y"}}, "l": []any{"0", "2"}, "m": []any{[]any{"b"}}}
	if !reflect.DeepEqual(obj, want) {
		t.Errorf("after removals: %v, want %v", obj, want)
	}
}

// setPointer makes the objects on its way, sets list elements in place and JSON's null as a
// value, and sets nothing through what does not exist; pointerValue reads the same fields.
func TestSetPointer(t *testing.T) {
	obj := map[string]any{"spec": map[string]any{"containers": []any{map[string]any{"name": "c", "image": "a"}}, "n": nil}}
	setPointer(obj, "/spec/containers/0/image", "b")
	setPointer(obj, "/spec/containers/0/args", nil)
	setPointer(obj, "/spec/containers/1/image", "x") // no element 1
	setPointer(obj, "/spec/n", []any{nil})
	setPointer(obj, "/spec/n/0", nil)
	setPointer(obj, "/metadata/annotations/a~1b", "v")
	setPointer(obj, "/spec/containers/0/name/x", "y") // through a string
	want := map[string]any{
		"spec":     map[string]any{"containers": []any{map[string]any{"name": "c", "image": "b", "args": nil}}, "n": []any{nil}},
		"metadata": map[string]any{"annotations": map[string]any{"a/b": "v"}},
	}
	if !reflect.DeepEqual(obj, want) {
		t.Fatalf("after sets: %v, want %v", obj, want)
	}
	for p, want := range map[string]any{"/spec/containers/0/image": "b", "/metadata/annotations/a~1b": "v", "/spec/n/0": nil} {
		if v, ok := pointerValue(obj, p); !ok || !reflect.DeepEqual(v, want) {
			t.Errorf("pointerValue(%q) = %v, %v; want %v", p, v, ok, want)
		}
	}
	for _, p := range []string{"/spec/containers/1", "/spec/missing", "/spec/containers/0/name/x"} {
		if v, ok := pointerValue(obj, p); ok {
			t.Errorf("pointerValue(%q) = %v, want none", p, v)
		}
	}
}

// MemoMapper asks its mapper once per kind and version found, and every time for one that is
// not (yet) there.
func TestMemoMapper(t *testing.T) {
	t.Parallel()
	inner := &countingMapper{RESTMapper: guardtest.Mapper()}
	m := MemoMapper(inner)
	gk := schema.GroupKind{Kind: "ConfigMap"}
	for range 3 {
		rm, err := m.RESTMapping(gk, "v1")
		if err != nil || rm.Resource.Resource != "configmaps" || rm.Scope.Name() != meta.RESTScopeNameNamespace {
			t.Fatalf("mapping %+v, %v", rm, err)
		}
		rm.Resource.Resource = "changed by a caller"
	}
	if inner.calls != 1 {
		t.Errorf("asked its mapper %d times for one kind", inner.calls)
	}
	missing := schema.GroupKind{Group: "example.com", Kind: "NotYet"}
	for range 2 {
		if _, err := m.RESTMapping(missing, "v1"); !meta.IsNoMatchError(err) {
			t.Fatalf("missing kind: %v", err)
		}
	}
	if inner.calls != 3 {
		t.Errorf("a missing kind was remembered: %d calls", inner.calls)
	}
}

type countingMapper struct {
	meta.RESTMapper
	calls int
}

func (c *countingMapper) RESTMapping(gk schema.GroupKind, versions ...string) (*meta.RESTMapping, error) {
	c.calls++
	return c.RESTMapper.RESTMapping(gk, versions...)
}

// A wait scoped to kinds waits for those alone: `Kind` of any group, `Kind.group` of that one,
// `Kind.` of the core group; unscoped, for every object.
func TestWaitScope(t *testing.T) {
	cm := schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}
	dep := schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}
	cr := schema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "Deployment"}
	for _, tc := range []struct {
		kinds []string
		want  []bool // cm, dep, cr
	}{
		{nil, []bool{true, true, true}},
		{[]string{"Deployment"}, []bool{false, true, true}},
		{[]string{"Deployment.apps"}, []bool{false, true, false}},
		{[]string{"ConfigMap.", "Deployment.example.com"}, []bool{true, false, true}},
	} {
		p := WaitPolicy{Enable: true, Kinds: tc.kinds}
		for i, gvk := range []schema.GroupVersionKind{cm, dep, cr} {
			if got := p.waits(gvk); got != tc.want[i] {
				t.Errorf("kinds %v: waits for %s: %v, want %v", tc.kinds, gvk, got, tc.want[i])
			}
		}
	}
}
