package guard

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	apirequest "k8s.io/apiserver/pkg/endpoints/request"

	"github.com/rudder-operator/rudder/internal/records"
)

// Ownership: inside its confinement, a release changes and deletes only what it made. What a
// release made carries its owner's AnnotationOwner: internal/helm's post-renderer marks every
// manifest object, and the release's storage marks every hook before Helm stores or runs it.
// A CR's values cannot forge that mark for another CR (the post-renderer overwrites it), and
// objects made outside rudder do not carry it.
//
// The rule is enforced on requests, so that it holds whatever path of Helm's makes them: the
// guard lets an update, patch (a server-side apply is one, and may create) or delete of a named
// object through only after it has read the object (as the release's identity) and found it
// marked as the owner's, and it sends a delete with the UID it read as a precondition, so that
// the API server deletes that object or nothing. Before an action's first write, internal/helm
// refuses hooks whose kind and name exist and are not the release's (NotMadeBy): Helm's default
// before-hook-creation policy would otherwise delete another's object and put the hook in its
// place.

// Owner is the CR a release belongs to.
type Owner struct {
	GVK schema.GroupVersionKind
	Key types.NamespacedName
	UID types.UID
}

// OwnerOf is the value of AnnotationOwner that marks what a release of owner made.
func OwnerOf(o Owner) string {
	if o.Key.Name == "" {
		return ""
	}
	return records.OwnerAnnotation(o.GVK.GroupKind(), o.Key)
}

// NotMadeBy says why an object whose annotations are annotations was not made by the release
// whose AnnotationOwner is owner; "" when it was. The one decision of ownership: the guard and
// the checks before an action's first write both ask it.
func NotMadeBy(annotations map[string]string, owner string) string {
	switch got := annotations[records.AnnotationOwner]; got {
	case owner:
		return ""
	case "":
		return fmt.Sprintf("it exists and was not made by this release (it has no %s annotation): a release changes and deletes only what it "+
			"made", records.AnnotationOwner)
	default:
		return fmt.Sprintf("it exists and was not made by this release (annotation %s is %q, this release's is %q): a release changes and "+
			"deletes only what it made", records.AnnotationOwner, got, owner)
	}
}

// mutates reports whether a request changes or deletes one named object.
func mutates(info *apirequest.RequestInfo) bool {
	if !info.IsResourceRequest || info.Name == "" {
		return false
	}
	switch info.Verb {
	case "update", "patch", "delete":
		return true
	}
	return false
}

func drain(resp *http.Response) {
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
	resp.Body.Close()
}

// withUIDPrecondition makes a delete request's body DeleteOptions that delete only the object
// of that UID.
func withUIDPrecondition(req *http.Request, uid types.UID) error {
	opts := map[string]any{}
	if req.Body != nil {
		b, err := io.ReadAll(req.Body)
		req.Body.Close()
		if err != nil {
			return err
		}
		if len(bytes.TrimSpace(b)) > 0 && strings.Contains(req.Header.Get("Content-Type"), "json") {
			if err := json.Unmarshal(b, &opts); err != nil {
				return fmt.Errorf("reading the options of a delete: %w", err)
			}
		}
	}
	opts["preconditions"] = map[string]any{"uid": string(uid)}
	b, err := json.Marshal(opts)
	if err != nil {
		return err
	}
	req.Body = io.NopCloser(bytes.NewReader(b))
	req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil }
	req.ContentLength = int64(len(b))
	req.Header.Set("Content-Type", "application/json")
	return nil
}

func gvrOf(info *apirequest.RequestInfo) schema.GroupVersionResource {
	return schema.GroupVersionResource{Group: info.APIGroup, Version: info.APIVersion, Resource: info.Resource}
}
