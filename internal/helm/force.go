package helm

import (
	"context"
	"errors"
	"fmt"
	"time"

	"helm.sh/helm/v4/pkg/kube"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/cli-runtime/pkg/resource"
	"k8s.io/client-go/util/retry"

	"github.com/rudder-operator/rudder/internal/libtext"
)

// An upgrade with upgrade.force replaces the objects whose update the API server refuses as
// changing an immutable field (a Deployment's selector, a StatefulSet's volumeClaimTemplates,
// a Job's template): Helm 3's own --force only PUTs the object, which the API server refuses
// the same way. The replacement happens inside the one upgrade, so the release gains one
// revision, and only for the objects that need it: each is asked with a server-side dry run
// of the patch Helm sent.

// ImmutableField reports whether err (an action's, whose text Helm joins) may say that the
// API server refused an update because it changes an immutable field. Which objects it was
// about, if any, the dry runs of replaceImmutable tell.
func ImmutableField(err error) bool {
	return err != nil && libtext.ImmutableUpdate(err.Error())
}

// Update is Helm's, after the fields a rudder before abf8a42 holds on the objects of a
// server-side action are moved to FieldManager (kubeClient.foldLegacy, below). With force,
// when Helm's update failed on an immutable field, the objects whose patch the API server
// refuses as immutable are deleted and created as the target has them, and Helm's update runs
// once more for the rest.
func (k *kubeClient) Update(original, target kube.ResourceList, opts ...kube.ClientUpdateOption) (*kube.Result, error) {
	k.unasked.on.Store(false)
	if k.serverSide {
		if err := k.foldLegacy(target); err != nil {
			return nil, err
		}
	}
	var manifest []runtime.Object
	if k.force && k.serverSide {
		// Helm's apply refreshes each target it applied with the API server's answer, which an
		// apply may not send again (its managedFields): the second update applies the manifest.
		manifest = make([]runtime.Object, len(target))
		for i, info := range target {
			manifest[i] = info.Object.DeepCopyObject()
		}
	}
	res, err := k.Client.Update(original, target, opts...)
	if err == nil || !k.force || !ImmutableField(err) {
		return res, err
	}
	for i, obj := range manifest {
		target[i].Object = obj
	}
	replaced, rerr := k.replaceImmutable(original, target)
	k.replaced = append(k.replaced, replaced...)
	switch {
	case rerr != nil:
		return res, fmt.Errorf("%w; replacing the objects with immutable fields (upgrade.force): %w", err, rerr)
	case len(replaced) == 0:
		return res, err
	}
	return k.Client.Update(original, target, opts...)
}

// replaceImmutable replaces each object of target whose update the API server refuses as
// immutable, and names those it replaced.
func (k *kubeClient) replaceImmutable(original, target kube.ResourceList) ([]string, error) {
	var replaced []string
	for _, info := range target {
		orig := original.Get(info)
		if orig == nil {
			continue
		}
		h := resource.NewHelper(info.Client, info.Mapping)
		immutable, err := refusedAsImmutable(h, orig, info, k.serverSide)
		if err != nil {
			return replaced, err
		}
		if !immutable {
			continue
		}
		// Never delete what could not be created again: the object as the target has it must
		// pass the API server's validation and admission as a new one.
		if err := creatable(info); err != nil {
			return replaced, err
		}
		if err := k.recreate(h, info); err != nil {
			return replaced, err
		}
		replaced = append(replaced, describeInfo(info))
	}
	return replaced, nil
}

// refusedAsImmutable reports whether the API server refuses the patch Helm makes from orig to
// info (against the live object) as changing an immutable field, asking with a dry run: of
// the apply itself when the action applies server-side.
func refusedAsImmutable(h *resource.Helper, orig, info *resource.Info, serverSide bool) (bool, error) {
	if serverSide {
		_, err := applyObject(info, true)
		return isImmutableStatus(err), nil
	}
	current, err := h.Get(info.Namespace, info.Name)
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("reading %s: %w", describeInfo(info), err)
	}
	patch, pt, err := threeWayPatch(orig.Object, info.Object, current)
	if err != nil || patch == nil {
		return false, err
	}
	// A helper of its own: DryRun sets the helper it is called on.
	_, err = resource.NewHelper(info.Client, info.Mapping).DryRun(true).Patch(info.Namespace, info.Name, pt, patch, nil)
	return isImmutableStatus(err), nil
}

// creatable asks the API server, with a dry run, whether the object of info would be created:
// validation and admission run before the store finds the name taken, so AlreadyExists says
// yes.
func creatable(info *resource.Info) error {
	_, err := resource.NewHelper(info.Client, info.Mapping).DryRun(true).Create(info.Namespace, true, info.Object.DeepCopyObject())
	if err == nil || apierrors.IsAlreadyExists(err) {
		return nil
	}
	return fmt.Errorf("not replacing %s: the API server would not create it as the chart has it either: %w", describeInfo(info), err)
}

// isImmutableStatus reports whether err is the API server's refusal of an update as changing
// an immutable field.
func isImmutableStatus(err error) bool {
	var se apierrors.APIStatus
	if !apierrors.IsInvalid(err) || !errors.As(err, &se) {
		return false
	}
	if d := se.Status().Details; d != nil {
		for _, c := range d.Causes {
			if c.Type == metav1.CauseType(field.ErrorTypeForbidden) || libtext.ImmutableUpdate(c.Message) {
				return true
			}
		}
	}
	return ImmutableField(err)
}

// recreate deletes the object of info (through the guard, which checks that the release made
// it and deletes by its UID), waits until it is gone, and creates it as info has it.
func (k *kubeClient) recreate(h *resource.Helper, info *resource.Info) error {
	bg := metav1.DeletePropagationBackground
	if _, err := h.DeleteWithOptions(info.Namespace, info.Name,
		&metav1.DeleteOptions{PropagationPolicy: &bg}); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting %s to replace it: %w", describeInfo(info), err)
	}
	err := wait.PollUntilContextTimeout(k.context(), 100*time.Millisecond, k.timeout, true, func(context.Context) (bool, error) {
		_, err := h.Get(info.Namespace, info.Name)
		return apierrors.IsNotFound(err), nil
	})
	if err != nil {
		return fmt.Errorf("%s still exists %s after its deletion: %w", describeInfo(info), k.timeout, err)
	}
	// What the create answers is not kept: Helm's update that follows reads the object again.
	// A server-side release creates it by applying it, so that FieldManager's apply holds its
	// fields as before.
	create := func() error { _, err := h.Create(info.Namespace, true, info.Object.DeepCopyObject()); return err }
	if k.serverSide {
		create = func() error { _, err := applyObject(info, false); return err }
	}
	if err := create(); err != nil {
		return fmt.Errorf("creating %s again: %w", describeInfo(info), err)
	}
	return nil
}

// describeInfo names an object of an action as Describe does.
func describeInfo(info *resource.Info) string {
	k := info.Mapping.GroupVersionKind.Kind
	if info.Namespace == "" {
		return k + "/" + info.Name
	}
	return k + "/" + info.Namespace + "/" + info.Name
}

// applyObject applies info's object server-side as FieldManager, taking every field it sets
// (the object is being replaced, or asked about), as a dry run when dryRun.
func applyObject(info *resource.Info, dryRun bool) (runtime.Object, error) {
	data, err := runtime.Encode(unstructured.UnstructuredJSONScheme, info.Object)
	if err != nil {
		return nil, err
	}
	force := true
	return resource.NewHelper(info.Client, info.Mapping).DryRun(dryRun).WithFieldManager(FieldManager).
		Patch(info.Namespace, info.Name, types.ApplyPatchType, data, &metav1.PatchOptions{Force: &force})
}

// foldLegacy moves what legacyFieldManager holds on each object of targets that exists to
// FieldManager (see foldLegacy), before an action applies them server-side: an object is read
// once per process for it (folded), and patched only when it holds something of the legacy
// manager's. A patch that meets a newer object reads it again (retry.RetryOnConflict).
func (k *kubeClient) foldLegacy(targets kube.ResourceList) error {
	for _, info := range targets {
		key := info.Mapping.Resource.String() + "/" + info.Namespace + "/" + info.Name
		if _, ok := folded.Get(key); ok {
			continue
		}
		h := resource.NewHelper(info.Client, info.Mapping).WithFieldManager(FieldManager)
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			live, err := h.Get(info.Namespace, info.Name)
			if err != nil {
				return err
			}
			m, err := meta.Accessor(live)
			if err != nil {
				return err
			}
			patch, err := foldLegacy(m.GetManagedFields(), m.GetResourceVersion())
			if err != nil || patch == nil {
				return err
			}
			_, err = h.Patch(info.Namespace, info.Name, types.JSONPatchType, patch, nil)
			return err
		})
		switch {
		case apierrors.IsNotFound(err):
			continue // the action creates it, as FieldManager
		case err != nil:
			return fmt.Errorf("moving the fields of %s from field manager %s to %s: %w", describeInfo(info), legacyFieldManager, FieldManager, err)
		}
		folded.Add(key, struct{}{})
	}
	return nil
}
