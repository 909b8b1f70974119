package controllers

import (
	"context"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
)

// unstructuredReader serves typed reads from the unstructured informers of the dependents
// cache. The dependent watches are unstructured; a typed Get on the same cache would start a
// second informer for the same kind, which doubles its memory and can lag behind the one whose
// event triggered the pass (a hook would then read the old state and no further event would
// come).
type unstructuredReader struct {
	r      client.Reader
	scheme *runtime.Scheme
}

func (u unstructuredReader) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if _, ok := obj.(runtime.Unstructured); ok {
		return u.r.Get(ctx, key, obj, opts...)
	}
	gvk, err := apiutil.GVKForObject(obj, u.scheme)
	if err != nil {
		return err
	}
	live := &unstructured.Unstructured{}
	live.SetGroupVersionKind(gvk)
	if err := u.r.Get(ctx, key, live, opts...); err != nil {
		return err
	}
	return runtime.DefaultUnstructuredConverter.FromUnstructured(live.Object, obj)
}

func (u unstructuredReader) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	if _, ok := list.(runtime.Unstructured); ok {
		return u.r.List(ctx, list, opts...)
	}
	gvk, err := apiutil.GVKForObject(list, u.scheme)
	if err != nil {
		return err
	}
	live := &unstructured.UnstructuredList{}
	live.SetGroupVersionKind(gvk)
	if err := u.r.List(ctx, live, opts...); err != nil {
		return err
	}
	return runtime.DefaultUnstructuredConverter.FromUnstructured(live.UnstructuredContent(), list)
}
