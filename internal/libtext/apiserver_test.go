package libtext_test

import (
	"context"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rudder-operator/rudder/internal/crtest"
	"github.com/rudder-operator/rudder/internal/libtext"
)

var env *crtest.Env

var suite = crtest.Suite{Setup: func(e *crtest.Env) (func() error, error) {
	env = e
	return nil, nil
}}

// TestAPIServerImmutableWords: the API server of the test control plane (the version
// hack/tools pins) refuses each update that upgrade.force replaces for, in words
// ImmutableUpdate recognises: a Deployment's selector, a StatefulSet's volumeClaimTemplates,
// a PersistentVolumeClaim's spec, an immutable ConfigMap's data, a Service's clusterIP. A
// change that is merely invalid is not taken for one.
func TestAPIServerImmutableWords(t *testing.T) {
	crtest.NeedsCluster(t)
	ns := crtest.NewNamespace(t, env.Client, "libtext-")
	ctx := context.Background()
	labels := func(v string) map[string]string { return map[string]string{"app": v} }
	pod := func(v string) corev1.PodTemplateSpec {
		return corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels(v)},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}}
	}
	claim := func(size string) corev1.PersistentVolumeClaimSpec {
		return corev1.PersistentVolumeClaimSpec{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(size)}}}
	}
	om := func(name string) metav1.ObjectMeta { return metav1.ObjectMeta{Namespace: ns, Name: name} }
	cases := []struct {
		name   string
		obj    client.Object
		change func(client.Object)
		// immutable: the API server refuses the change as one that no value may make.
		immutable bool
	}{
		{"Deployment selector", &appsv1.Deployment{ObjectMeta: om("dep"), Spec: appsv1.DeploymentSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels("a")}, Template: pod("a")}},
			func(o client.Object) {
				d := o.(*appsv1.Deployment)
				d.Spec.Selector.MatchLabels, d.Spec.Template = labels("b"), pod("b")
			}, true},
		{"StatefulSet volumeClaimTemplates", &appsv1.StatefulSet{ObjectMeta: om("sts"), Spec: appsv1.StatefulSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels("s")}, Template: pod("s"),
			VolumeClaimTemplates: []corev1.PersistentVolumeClaim{{ObjectMeta: metav1.ObjectMeta{Name: "data"}, Spec: claim("1Gi")}}}},
			func(o client.Object) {
				o.(*appsv1.StatefulSet).Spec.VolumeClaimTemplates[0].Spec.Resources.Requests[corev1.ResourceStorage] = resource.MustParse("2Gi")
			}, true},
		{"PersistentVolumeClaim spec", &corev1.PersistentVolumeClaim{ObjectMeta: om("pvc"), Spec: claim("1Gi")},
			func(o client.Object) {
				o.(*corev1.PersistentVolumeClaim).Spec.AccessModes = []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany}
			}, true},
		{"immutable ConfigMap data", &corev1.ConfigMap{ObjectMeta: om("cm"), Immutable: ptr.To(true), Data: map[string]string{"k": "a"}},
			func(o client.Object) { o.(*corev1.ConfigMap).Data["k"] = "b" }, true},
		{"Service clusterIP", &corev1.Service{ObjectMeta: om("svc"), Spec: corev1.ServiceSpec{
			Ports: []corev1.ServicePort{{Port: 80}}}},
			func(o client.Object) { o.(*corev1.Service).Spec.ClusterIP = "10.0.0.250" }, true},
		{"negative replicas", &appsv1.Deployment{ObjectMeta: om("neg"), Spec: appsv1.DeploymentSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels("n")}, Template: pod("n")}},
			func(o client.Object) { o.(*appsv1.Deployment).Spec.Replicas = ptr.To[int32](-1) }, false},
	}
	for _, c := range cases {
		if err := env.Client.Create(ctx, c.obj); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		// The object's own controller may write it meanwhile (a Deployment's): a conflict is
		// that, and the change is made again on the object as it is now.
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			if err := env.Client.Get(ctx, client.ObjectKeyFromObject(c.obj), c.obj); err != nil {
				return err
			}
			c.change(c.obj)
			return env.Client.Update(ctx, c.obj)
		})
		if !apierrors.IsInvalid(err) {
			t.Fatalf("%s: the update was answered %v, not 422 Invalid", c.name, err)
		}
		if got := libtext.ImmutableUpdate(err.Error()); got != c.immutable {
			t.Errorf("%s: ImmutableUpdate = %v, want %v, for %q", c.name, got, c.immutable, err.Error())
		}
	}
}
