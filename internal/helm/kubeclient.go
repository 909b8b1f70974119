package helm

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"helm.sh/helm/v4/pkg/kube"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/cli-runtime/pkg/resource"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"
	kjson "sigs.k8s.io/json"
)

func (*kubeClient) IsReachable() error { return nil }

func (k *kubeClient) Build(r io.Reader, validate bool) (kube.ResourceList, error) {
	if k.post == nil || validate {
		return k.Client.Build(r, validate)
	}
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, err
	}
	// The manifest of the action's own render: the chart's templates/ CRDs first.
	if err := (crdClient{k}).createOwnCRDs(); err != nil {
		return nil, err
	}
	if infos, ok := k.infos(string(data)); ok {
		if k.installing && !k.serverSide && k.notAsked == nil {
			// The install's own objects, which Helm's existence check asks about next.
			k.notAsked = make(map[*resource.Info]bool, len(infos))
			for _, info := range infos {
				k.notAsked[info] = true
			}
			k.unasked.on.Store(true)
		}
		return infos, nil
	}
	return k.Client.Build(bytes.NewReader(data), validate)
}

// infos are the objects of manifest as Helm's Build (cli-runtime's builder, without
// validation) finds them, when each document of manifest is one the post-renderer wrote (see
// postRenderer.written; Helm stores each after a "# Source" comment): Infos of copies of the
// post-renderer's objects, each with its REST mapping and a client for its group version,
// placed in the release's namespace when namespaced and without one. The builder would decode
// the text again, YAML to JSON to objects, and decode every object's JSON twice more on the
// way. ok is false when a document is not one the post-renderer wrote, or an object is one the
// builder refuses (its kind unknown, its metadata malformed): Helm's Build then says why.
func (k *kubeClient) infos(manifest string) (list kube.ResourceList, ok bool) {
	objs := k.post.objectsOf(manifest)
	if objs == nil {
		return nil, false
	}
	for _, o := range objs {
		obj := &unstructured.Unstructured{Object: jsonCopy(o).(map[string]any)}
		gvk := obj.GroupVersionKind()
		mapping, err := k.getter.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil || !wellFormedMetadata(obj) {
			return nil, false
		}
		client, err := k.restClient(gvk.GroupVersion())
		if err != nil {
			return nil, false
		}
		info := &resource.Info{Client: client, Mapping: mapping, Namespace: obj.GetNamespace(), Name: obj.GetName(),
			ResourceVersion: obj.GetResourceVersion(), Object: obj}
		if info.Namespaced() && info.Namespace == "" {
			info.Namespace = k.getter.namespace
			obj.SetNamespace(info.Namespace)
		}
		list = append(list, info)
	}
	return list, true
}

// wellFormedMetadata reports whether obj's metadata decodes as ObjectMeta, which cli-runtime's
// builder requires of every object it reads.
func wellFormedMetadata(obj *unstructured.Unstructured) bool {
	md, ok := obj.Object["metadata"].(map[string]any)
	if !ok {
		return obj.Object["metadata"] == nil
	}
	return runtime.DefaultUnstructuredConverter.FromUnstructured(md, &metav1.ObjectMeta{}) == nil
}

// restClient is the client cli-runtime's builder makes for unstructured objects of gv, with
// its creates answered as createClient says; made once per group version.
func (k *kubeClient) restClient(gv schema.GroupVersion) (resource.RESTClient, error) {
	if c, ok := k.clients[gv]; ok {
		return c, nil
	}
	cfg, err := k.getter.ToRESTConfig()
	if err != nil {
		return nil, err
	}
	cfg.ContentConfig = resource.UnstructuredPlusDefaultContentConfig()
	cfg.GroupVersion = &gv
	cfg.APIPath = "/apis"
	if gv.Group == "" {
		cfg.APIPath = "/api"
	}
	c, err := rest.RESTClientFor(cfg)
	if err != nil {
		return nil, err
	}
	cfg.NegotiatedSerializer = metadataAnswers(cfg.NegotiatedSerializer)
	post, err := rest.RESTClientFor(cfg)
	if err != nil {
		return nil, err
	}
	cc := createClient{RESTClient: c, post: post, unasked: &k.unasked}
	if k.installing && !k.serverSide { // the only actions unasked is ever on for
		if cc.absent, err = absentClient(cfg); err != nil {
			return nil, err
		}
	}
	if k.clients == nil {
		k.clients = map[schema.GroupVersion]createClient{}
	}
	k.clients[gv] = cc
	return k.clients[gv], nil
}

// metadataAnswers is ns with its JSON decoder replaced by metadataCodec.
func metadataAnswers(ns runtime.NegotiatedSerializer) runtime.NegotiatedSerializer {
	info, _ := runtime.SerializerInfoForMediaType(ns.SupportedMediaTypes(), runtime.ContentTypeJSON)
	info.Serializer = metadataCodec{Encoder: info.Serializer}
	info.PrettySerializer, info.StrictSerializer = nil, nil
	return runtime.NewSimpleNegotiatedSerializer(info)
}

// metadataCodec encodes as the encoder it wraps, and decodes an object as its
// PartialObjectMetadata; a Status (the body of an error) as a Status. Which is which, and what
// is refused (a body without a kind), is as in cli-runtime's unstructured codec, so that
// errors keep their reason and code.
type metadataCodec struct{ runtime.Encoder }

func (metadataCodec) Decode(data []byte, _ *schema.GroupVersionKind, _ runtime.Object) (runtime.Object, *schema.GroupVersionKind, error) {
	obj := &metav1.PartialObjectMetadata{}
	if err := kjson.UnmarshalCaseSensitivePreserveInts(data, obj); err != nil {
		return nil, nil, err
	}
	gvk := obj.GroupVersionKind()
	switch {
	case gvk.Kind == "":
		return nil, &gvk, runtime.NewMissingKindErr(string(data))
	case !strings.EqualFold(gvk.Kind, "status") || gvk.Version != "v1" || (gvk.Group != "" && gvk.Group != "meta.k8s.io"):
		return obj, &gvk, nil
	}
	st := &metav1.Status{}
	if err := kjson.UnmarshalCaseSensitivePreserveInts(data, st); err != nil {
		return nil, nil, err
	}
	return st, &gvk, nil
}

// Helm's waits (a hook until it completes, a test Pod, objects until ready or deleted) take a
// timeout and no context. These end with the action's context too, so that deleting a CR or
// stopping rudder ends an action wedged on a hook at once rather than at actionTimeout: the
// wait returns the context's cause, and its requests, made through the action's guard, are
// cancelled with it (see guard.bind), so Helm's own wait ends as soon as it looks again.

// GetWaiter is Helm's waiter of strategy ws, whose waits end with the action's context: Helm's
// own (kube.WithWaitContext), and, whatever a wait does meanwhile, rudder's (untilDone).
func (k *kubeClient) GetWaiter(ws kube.WaitStrategy) (kube.Waiter, error) {
	return k.GetWaiterWithOptions(ws)
}

// GetWaiterWithOptions is GetWaiter with Helm's wait options.
func (k *kubeClient) GetWaiterWithOptions(ws kube.WaitStrategy, opts ...kube.WaitOption) (kube.Waiter, error) {
	w, err := k.Client.GetWaiterWithOptions(ws, append(opts, kube.WithWaitContext(k.context()))...)
	if err != nil {
		return nil, err
	}
	return &ctxWaiter{Waiter: w, k: k}, nil
}

// ctxWaiter is a Helm waiter whose waits end with the action's context (see untilDone).
type ctxWaiter struct {
	kube.Waiter
	k *kubeClient
}

// Wait waits for the objects the watch's wait policy scopes it to.
func (w *ctxWaiter) Wait(resources kube.ResourceList, timeout time.Duration) error {
	resources = w.k.wait.scoped(resources)
	return w.k.untilDone("waiting for the objects to be ready", func() error { return w.Waiter.Wait(resources, timeout) })
}

// WaitWithJobs is Wait, Jobs until complete included.
func (w *ctxWaiter) WaitWithJobs(resources kube.ResourceList, timeout time.Duration) error {
	resources = w.k.wait.scoped(resources)
	return w.k.untilDone("waiting for the objects and jobs to be ready", func() error { return w.Waiter.WaitWithJobs(resources, timeout) })
}

func (w *ctxWaiter) WatchUntilReady(resources kube.ResourceList, timeout time.Duration) error {
	return w.k.untilDone("waiting for the hooks to complete", func() error { return w.Waiter.WatchUntilReady(resources, timeout) })
}

func (w *ctxWaiter) WaitForDelete(resources kube.ResourceList, timeout time.Duration) error {
	return w.k.untilDone("waiting for the objects to be deleted", func() error { return w.Waiter.WaitForDelete(resources, timeout) })
}

// untilDone runs wait, and returns when it does or when the action's context ends, whichever
// is first.
func (k *kubeClient) untilDone(what string, wait func() error) error {
	ctx := k.context()
	if ctx.Done() == nil {
		return wait()
	}
	done := make(chan error, 1)
	go func() { done <- wait() }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return fmt.Errorf("%s: %w", what, context.Cause(ctx))
	}
}

// Create is Helm's create of objects. Helm 4 makes every client-side create of the process
// one at a time, behind one mutex (helm.sh/helm/v4 pkg/kube, createResource): for rudder,
// which installs many releases at once, that would queue every install's creates behind every
// other's. A client-side create here is Helm 3's, which Helm 4's repeats but for the mutex:
// the objects of one kind at once, kind after kind in the order given, each a POST as the
// field manager Helm names (FieldManager), again on a conflict. A server-side apply is Helm's own.
func (k *kubeClient) Create(resources kube.ResourceList, opts ...kube.ClientCreateOption) (*kube.Result, error) {
	k.unasked.on.Store(false)
	if k.serverSide {
		return k.Client.Create(resources, opts...)
	}
	if len(resources) == 0 {
		return nil, kube.ErrNoObjectsVisited
	}
	var errs []error
	for start := 0; start < len(resources); {
		kind := resources[start].Object.GetObjectKind().GroupVersionKind().Kind
		end := start + 1
		for end < len(resources) && resources[end].Object.GetObjectKind().GroupVersionKind().Kind == kind {
			end++
		}
		batch := make([]error, end-start)
		var wg sync.WaitGroup
		for i, info := range resources[start:end] {
			wg.Go(func() { batch[i] = k.createObject(info) })
		}
		wg.Wait()
		errs = append(errs, batch...)
		start = end
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return &kube.Result{Created: resources}, nil
}

// createObject creates info's object as Helm's client-side create does; one that exists, of
// those Helm's install did not ask about first (notAsked), is met as its check would have
// (createExisting).
func (k *kubeClient) createObject(info *resource.Info) error {
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		obj, err := resource.NewHelper(info.Client, info.Mapping).WithFieldManager(FieldManager).Create(info.Namespace, true, info.Object)
		if err != nil {
			return err
		}
		return info.Refresh(obj, true)
	})
	if apierrors.IsAlreadyExists(err) && k.notAsked[info] {
		return k.createExisting(info)
	}
	return err
}

// createExisting is the create of info's object that found it exists, as Helm's install would
// have met it: adopted when it carries Helm's ownership metadata of the release (the target
// carries the release's, which Helm set before the create), by the update Helm's install
// makes of the objects it adopts on a client-side install; else refused with Helm's message.
func (k *kubeClient) createExisting(info *resource.Info) error {
	live, err := resource.NewHelper(info.Client, info.Mapping).Get(info.Namespace, info.Name)
	if err != nil {
		return fmt.Errorf("could not get information about the resource %s: %w", resourceString(info), err)
	}
	if err := helmOwned(live, info); err != nil {
		return fmt.Errorf("%s exists and cannot be imported into the current release: %w", resourceString(info), err)
	}
	original := *info
	_, err = k.Client.Update(kube.ResourceList{&original}, kube.ResourceList{info}, kube.ClientUpdateOptionServerSideApply(false, false),
		kube.ClientUpdateOptionThreeWayMergeForUnstructured(false), kube.ClientUpdateOptionUpgradeClientSideFieldManager(true))
	return err
}
