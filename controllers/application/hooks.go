package application

import (
	"context"
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	appv1 "github.com/rudder-operator/rudder/api/apps/v1"
	"github.com/rudder-operator/rudder/internal/hook"
)

// GVK of the Application kind.
var GVK = appv1.GroupVersion.WithKind("Application")

// Register adds the Application hooks to a registry.
func Register(r *hook.Registry) {
	r.AddPreRelease(GVK, hook.PreReleaseFunc(addLabels))
	r.AddPostRelease(GVK, hook.PostReleaseFunc(mirrorStatus))
}

// addLabels passes the Application's labels to the chart, which puts them on the Deployment,
// the Service and the Pods.
func addLabels(_ context.Context, obj *unstructured.Unstructured, values map[string]any) (hook.Decision, error) {
	lbls := map[string]any{}
	for k, v := range obj.GetLabels() {
		lbls[k] = v
	}
	values["labels"] = lbls
	return hook.Proceed, nil
}

// mirrorStatus copies the live status of the Deployment and the Service into the CR. Their
// status changes arrive as dependent events, so the mirror follows them without polling.
func mirrorStatus(ctx context.Context, obj *unstructured.Unstructured, rel *hook.Release, c client.Reader) (time.Duration, error) {
	if rel == nil {
		return 0, nil
	}
	key := client.ObjectKey{Namespace: rel.Namespace, Name: rel.Name}
	var dep appsv1.Deployment
	if err := c.Get(ctx, key, &dep); err == nil {
		if err := setStatusField(obj, "workflow", &dep.Status); err != nil {
			return 0, err
		}
	} else if !apierrors.IsNotFound(err) {
		return 0, fmt.Errorf("reading deployment %s: %w", rel.Name, err)
	}
	var svc corev1.Service
	if err := c.Get(ctx, key, &svc); err == nil {
		if err := setStatusField(obj, "network", &svc.Status); err != nil {
			return 0, err
		}
	} else if !apierrors.IsNotFound(err) {
		return 0, fmt.Errorf("reading service %s: %w", rel.Name, err)
	}
	return 0, nil
}

func setStatusField(obj *unstructured.Unstructured, field string, v any) error {
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(v)
	if err != nil {
		return err
	}
	st, _, _ := unstructured.NestedMap(obj.Object, "status")
	if st == nil {
		st = map[string]any{}
	}
	st[field] = m
	obj.Object["status"] = st
	return nil
}
