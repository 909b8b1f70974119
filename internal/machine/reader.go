package machine

import (
	"context"
	"maps"
	"reflect"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
)

// operandReader serves the reads of hooks from the operand cache, typed or unstructured
// whatever the cache keeps of the kind (see OperandObject): a read in the other form would
// start a second informer for the same kind, which doubles its memory and can lag behind the
// one whose event triggered the pass (a hook would then read the old state and no further
// event would come). What is read carries no trace of the cached verdict.
type operandReader struct {
	r      client.Reader
	scheme *runtime.Scheme
}

func (o operandReader) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	gvk, err := apiutil.GVKForObject(obj, o.scheme)
	if err != nil {
		return err
	}
	live := OperandObject(gvk)
	if err := o.r.Get(ctx, key, live, opts...); err != nil {
		return err
	}
	return convertOperand(live, obj)
}

func (o operandReader) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	gvk, err := apiutil.GVKForObject(list, o.scheme)
	if err != nil {
		return err
	}
	item := gvk.GroupVersion().WithKind(strings.TrimSuffix(gvk.Kind, "List"))
	var live client.ObjectList = &unstructured.UnstructuredList{}
	live.GetObjectKind().SetGroupVersionKind(gvk)
	if _, typed := OperandObject(item).(*unstructured.Unstructured); !typed {
		obj, err := typedKinds.New(gvk)
		if err != nil {
			return err
		}
		live = obj.(client.ObjectList)
	}
	if err := o.r.List(ctx, live, opts...); err != nil {
		return err
	}
	items, err := meta.ExtractList(live)
	if err != nil {
		return err
	}
	_, toUnstructured := list.(*unstructured.UnstructuredList)
	out := make([]runtime.Object, len(items))
	for i, it := range items {
		var obj client.Object = &unstructured.Unstructured{}
		if !toUnstructured {
			n, err := o.scheme.New(item)
			if err != nil {
				return err
			}
			obj = n.(client.Object)
		}
		if err := convertOperand(it.(client.Object), obj); err != nil {
			return err
		}
		out[i] = obj
	}
	return meta.SetList(list, out)
}

// convertOperand sets obj to the cached object live, in obj's form, without the cached
// verdict. live is not changed: it may be the cache's own.
func convertOperand(live, obj client.Object) error {
	if l, ok := live.(*unstructured.Unstructured); ok {
		m := maps.Clone(l.Object)
		delete(m, kstatusKey)
		delete(m, kstatusMessageKey)
		if u, ok := obj.(*unstructured.Unstructured); ok {
			u.Object = m
			return nil
		}
		return runtime.DefaultUnstructuredConverter.FromUnstructured(m, obj)
	}
	if u, ok := obj.(*unstructured.Unstructured); ok {
		m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(live)
		if err != nil {
			return err
		}
		u.Object = m
		u.SetAnnotations(withoutVerdict(u.GetAnnotations()))
		return nil
	}
	reflect.ValueOf(obj).Elem().Set(reflect.ValueOf(live).Elem())
	obj.SetAnnotations(withoutVerdict(obj.GetAnnotations()))
	return nil
}
