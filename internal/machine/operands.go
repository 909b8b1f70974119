package machine

import (
	"errors"
	"maps"
	"reflect"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"

	"github.com/rudder-operator/rudder/internal/intern"
)

// The operand cache keeps, of each object rudder rendered, what a pass reads:
//   - its metadata, for change detection (generation, labels, annotations) and for mapping
//     its events to the CR (the owner annotation); not managedFields or ownerReferences;
//   - kstatus's verdict, computed once per watch event from the object as it came, under
//     kstatusKey and kstatusMessageKey: a pass reads the verdict instead of computing it;
//   - its status only when a post-release hook of a watched kind reads operands (the built-in
//     Application mirrors its Deployment's and Service's).
//
// Specs, pod templates and payloads are dropped. Drift re-apply reads the live object from the
// API server.
//
// Kubernetes' own kinds (client-go's scheme) are cached typed: their informers list and watch
// in protobuf, as Kubernetes' controllers do, and the verdict is kept as two annotations of the
// cached copy, which readers never see (see operandReader). Other kinds are cached
// unstructured (JSON), the verdict as two top-level fields. Decoding the operands' watch
// events as JSON was about a tenth of rudder's CPU per install.
const (
	kstatusKey        = "rudder.dev/kstatus"
	kstatusMessageKey = "rudder.dev/kstatus-message"
)

// typedKinds are the kinds the operand cache keeps typed: client-go's own, exactly. (Its global
// scheme is not that: Helm's kube package adds apiextensions' CustomResourceDefinition to it,
// which the manager's scheme, and so its cache, does not know.)
var typedKinds = func() *runtime.Scheme {
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		panic(err) // static registration; cannot fail at run time
	}
	return s
}()

// OperandObject is an empty object of gvk as the operand cache keeps it: typed for a kind of
// client-go's scheme, else unstructured.
func OperandObject(gvk schema.GroupVersionKind) client.Object {
	if typedKinds.Recognizes(gvk) {
		if obj, err := typedKinds.New(gvk); err == nil {
			if o, ok := obj.(client.Object); ok {
				o.GetObjectKind().SetGroupVersionKind(gvk)
				return o
			}
		}
	}
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(gvk)
	return u
}

// OperandTransform is the operand cache's transform (see above). The objects of judged kinds
// (a watch's healthChecks read them) keep their spec and status, and every other field.
func OperandTransform(keepStatus bool, judged map[schema.GroupVersionKind]bool) toolscache.TransformFunc {
	return func(in any) (any, error) {
		u, ok := in.(*unstructured.Unstructured)
		if !ok {
			if o, ok := in.(client.Object); ok {
				return typedOperand(o, keepStatus, judged), nil
			}
			return Compact(in)
		}
		if _, done := u.Object[kstatusKey]; !done {
			// A verdict kstatus cannot reach (a malformed status) is kept as an empty status
			// with the error as its message, and fails the pass that reads it.
			verdict, msg := "", ""
			if res, err := status.Compute(u); err != nil {
				msg = err.Error()
			} else {
				verdict, msg = string(res.Status), res.Message
			}
			u.Object[kstatusKey], u.Object[kstatusMessageKey] = verdict, msg
		}
		whole := judged[u.GroupVersionKind()]
		for k := range u.Object {
			switch k {
			case "apiVersion", "kind", "metadata", kstatusKey, kstatusMessageKey:
			case "status":
				if !keepStatus && !whole {
					delete(u.Object, k)
				}
			default:
				if !whole {
					delete(u.Object, k)
				}
			}
		}
		if md, ok := u.Object["metadata"].(map[string]any); ok {
			delete(md, "managedFields")
			delete(md, "ownerReferences")
		}
		u.Object = intern.Object(u.Object)
		return u, nil
	}
}

// typedOperand is what the operand cache keeps of a typed object (see above): a new object
// of its type with its type, metadata and, when keepStatus, status (and the spec too for a
// judged kind); the verdict in its annotations. An object already transformed is kept as it is.
func typedOperand(in client.Object, keepStatus bool, judged map[schema.GroupVersionKind]bool) client.Object {
	if _, done := in.GetAnnotations()[kstatusKey]; done {
		return in
	}
	if gvk, err := apiutil.GVKForObject(in, typedKinds); err == nil {
		in.GetObjectKind().SetGroupVersionKind(gvk) // informers' objects come without it
	}
	verdict, msg := typedVerdict(in)
	whole := judged[in.GetObjectKind().GroupVersionKind()]
	out := in
	if v := reflect.ValueOf(in).Elem(); v.Kind() == reflect.Struct {
		o := reflect.New(v.Type())
		for _, f := range []string{"TypeMeta", "ObjectMeta", "Spec", "Status"} {
			if (f == "Status" && !keepStatus && !whole) || (f == "Spec" && !whole) {
				continue
			}
			if src := v.FieldByName(f); src.IsValid() {
				o.Elem().FieldByName(f).Set(src)
			}
		}
		out = o.Interface().(client.Object)
	}
	out.SetManagedFields(nil)
	out.SetOwnerReferences(nil)
	compactMeta(out)
	ann := out.GetAnnotations()
	if ann == nil {
		ann = map[string]string{}
	}
	ann[kstatusKey], ann[kstatusMessageKey] = intern.String(verdict), intern.String(msg)
	out.SetAnnotations(ann)
	return out
}

// typedVerdict is kstatus's verdict on a typed object ("" and the error when it has none).
// kstatus reads unstructured objects, and of them only the type, three fields of the metadata
// (generation, creation and deletion timestamps), the spec and the status: it is given those,
// the spec without its pod template. Converting the whole object cost more than decoding it.
func typedVerdict(obj client.Object) (verdict, msg string) {
	gvk := obj.GetObjectKind().GroupVersionKind()
	md := map[string]any{}
	if g := obj.GetGeneration(); g != 0 {
		md["generation"] = g
	}
	if t := obj.GetCreationTimestamp(); !t.IsZero() {
		md["creationTimestamp"] = t.UTC().Format(time.RFC3339)
	}
	if t := obj.GetDeletionTimestamp(); t != nil {
		md["deletionTimestamp"] = t.UTC().Format(time.RFC3339)
	}
	u := &unstructured.Unstructured{Object: map[string]any{"metadata": md}}
	u.SetGroupVersionKind(gvk)
	v := reflect.ValueOf(obj).Elem()
	for field, key := range map[string]string{"Spec": "spec", "Status": "status"} {
		f := v.FieldByName(field)
		if !f.IsValid() || f.Kind() != reflect.Struct {
			continue
		}
		c := reflect.New(f.Type())
		c.Elem().Set(f)
		if t := c.Elem().FieldByName("Template"); field == "Spec" && t.IsValid() && t.Kind() == reflect.Struct {
			t.SetZero()
		}
		m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(c.Interface())
		if err != nil {
			return "", err.Error()
		}
		u.Object[key] = m
	}
	res, err := status.Compute(u)
	if err != nil {
		return "", err.Error()
	}
	return string(res.Status), res.Message
}

// operandStatus is kstatus's verdict on a live object: the one the operand cache computed
// when the object last changed, or computed now for an object read from the API server.
func operandStatus(obj client.Object) (status.Status, string, error) {
	if u, ok := obj.(*unstructured.Unstructured); ok {
		if verdict, ok := u.Object[kstatusKey].(string); ok {
			msg, _ := u.Object[kstatusMessageKey].(string)
			return verdictOf(verdict, msg)
		}
		res, err := status.Compute(u)
		if err != nil {
			return "", "", err
		}
		return res.Status, res.Message, nil
	}
	ann := obj.GetAnnotations()
	if verdict, ok := ann[kstatusKey]; ok {
		return verdictOf(verdict, ann[kstatusMessageKey])
	}
	return verdictOf(typedVerdict(obj))
}

// verdictOf is a cached verdict: an empty one is kstatus's error, the message.
func verdictOf(verdict, msg string) (status.Status, string, error) {
	if verdict == "" {
		return "", "", errors.New(msg)
	}
	return status.Status(verdict), msg, nil
}

// Compact is what the caches keep of an object: not its managedFields (nothing reads them,
// and not keeping them saves memory and the copying of every cached read), and its strings
// interned (internal/intern): the keys of a CR's JSON, the labels of release records, the
// namespace, which every object of a kind repeats, are kept once. It drops managedFields as
// cache.TransformStripManagedFields does, without that function's round trip through the
// typed form that Unstructured.GetManagedFields makes (a JSON marshal per watch event).
func Compact(in any) (any, error) {
	switch o := in.(type) {
	case *unstructured.Unstructured:
		if md, ok := o.Object["metadata"].(map[string]any); ok {
			delete(md, "managedFields")
		}
		o.Object = intern.Object(o.Object)
	case metav1.Object:
		o.SetManagedFields(nil)
		compactMeta(o)
	}
	return in, nil
}

// compactMeta interns the strings of o's metadata that other objects repeat.
func compactMeta(o metav1.Object) {
	o.SetNamespace(intern.String(o.GetNamespace()))
	o.SetLabels(intern.Strings(o.GetLabels()))
	o.SetAnnotations(intern.Strings(o.GetAnnotations()))
	if f := o.GetFinalizers(); len(f) > 0 {
		for i := range f {
			f[i] = intern.String(f[i])
		}
	}
}

// withoutVerdict is a copy of a typed operand's annotations without the cached verdict.
func withoutVerdict(ann map[string]string) map[string]string {
	ann = maps.Clone(ann)
	delete(ann, kstatusKey)
	delete(ann, kstatusMessageKey)
	if len(ann) == 0 {
		return nil
	}
	return ann
}
