package helm

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"sort"

	"helm.sh/helm/v4/pkg/chart/common"
	chart "helm.sh/helm/v4/pkg/chart/v2"
	rcommon "helm.sh/helm/v4/pkg/release/common"
	release "helm.sh/helm/v4/pkg/release/v1"
	"helm.sh/helm/v4/pkg/storage"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rudder-operator/rudder/internal/guard"
	"github.com/rudder-operator/rudder/internal/records"
)

// Adopting a release another Helm-based operator made: operator-sdk's helm-operator and
// operator-framework's helm-operator-plugins (HOP) keep one release per CR, named after it, in
// its namespace, on Helm's Secret storage, as rudder does, and mark each object they apply as
// the CR's — an owner reference to the CR (a controller reference) where one can point at it,
// else the annotations operator-sdk/primary-resource ("<namespace>/<name>") and
// operator-sdk/primary-resource-type ("<Kind>.<group>"). rudder takes such a release over only
// on that proof, read from the objects themselves, never from the record (which whoever may
// write Secrets in the namespace writes): every object of the newest deployed revision that
// exists must carry it, and one must exist.

// The marks of operator-sdk's and HOP's helm-operators.
const (
	AnnotationPrimaryResource     = "operator-sdk/primary-resource"
	AnnotationPrimaryResourceType = "operator-sdk/primary-resource-type"
)

// ForeignFinalizers are the finalizers operator-sdk's and HOP's helm-operators put on a CR so
// that they uninstall its release first: rudder's replaces them once it has adopted it.
var ForeignFinalizers = []string{"helm.sdk.operatorframework.io/uninstall-release", "uninstall-helm-release"}

// Proof is what a release rudder did not make showed of its CR.
type Proof struct {
	// Why says which object failed the proof and why; "" when every one passed.
	Why string
	// Revision is the newest deployed revision, whose objects were read.
	Revision int
	// Objects are its objects that exist, as read (their resourceVersion the precondition of
	// adopting them).
	Objects []*unstructured.Unstructured
	// Chart is the revision's chart's fingerprint (ChartFingerprint) and ValuesDigest its
	// values' digest (records.ValuesDigest): what adopting compares with the CR's.
	Chart, ValuesDigest string
	// By names what made it, for the Adopted Event.
	By string
}

// ProveForeign reads the release name, which rudder did not make, and the objects of its
// newest deployed revision, as the scope's identity, and says whether they prove it is the
// scope's owner's. A release that is rudder's (of another CR, or of this one) proves nothing.
func (o *Owners) ProveForeign(ctx context.Context, s Scope, name string) (*Proof, error) {
	c := o.core
	_, revisions, err := c.history(ctx, s, name)
	if err != nil {
		return nil, err
	}
	newest, why := newestForeign(revisions)
	if why != "" {
		return &Proof{Why: why}, nil
	}
	p := &Proof{Revision: newest.Version, Chart: ChartFingerprint(newest.Chart), By: "another Helm operator (or helm)"}
	if p.ValuesDigest, err = records.ValuesDigest(newest.Config); err != nil {
		return nil, err
	}
	claimed, err := o.handedOver(ctx, s, newest)
	if err != nil {
		return nil, err
	}
	if claimed {
		p.By = "helm (handed over by its record's annotation " + guard.AnnotationValuesFor + ")"
	}
	objs, err := ParseIdentities(newest.Manifest, s.Namespace, c.mapper)
	if err != nil {
		return nil, fmt.Errorf("reading the objects of revision %d of release %s: %w", newest.Version, name, err)
	}
	read, err := c.metadataReader(s)
	if err != nil {
		return nil, err
	}
	for _, id := range objs {
		live, err := read(ctx, id)
		switch {
		case apierrors.IsForbidden(err):
			p.Why = fmt.Sprintf("%s cannot be read: %v", Describe(id), err)
			return p, nil
		case err != nil:
			return nil, fmt.Errorf("reading %s of release %s: %w", Describe(id), name, err)
		case live == nil:
			continue
		}
		if why := provesOwner(live, s, claimed); why != "" {
			p.Why = fmt.Sprintf("%s of revision %d %s", Describe(id), newest.Version, why)
			return p, nil
		}
		if !claimed && live.GetLabels()["helm.sdk.operatorframework.io/chart"] != "" {
			p.By = "operator-sdk's helm-operator"
		}
		o := id.DeepCopy()
		o.SetResourceVersion(live.GetResourceVersion())
		p.Objects = append(p.Objects, o)
	}
	if len(p.Objects) == 0 {
		p.Why = fmt.Sprintf("none of the objects of revision %d exists to prove it", newest.Version)
	}
	return p, nil
}

// newestForeign is the newest deployed revision of a release rudder did not make; why says why
// there is none to prove anything.
func newestForeign(revisions []*release.Release) (newest *release.Release, why string) {
	for _, rel := range revisions {
		if rel.Labels[records.LabelOwnerUID] != "" {
			return nil, "it is a release rudder made"
		}
		if rel.Info != nil && rel.Info.Status == rcommon.StatusDeployed {
			newest = rel // revisions are oldest first
		}
	}
	if newest == nil {
		return nil, "it has no deployed revision"
	}
	return newest, ""
}

// handedOver reports whether the record of rel claims the scope's owner, as a valuesFrom source
// does (guard.AnnotationValuesFor): a release handed over by someone who may write the
// namespace's Secrets.
func (o *Owners) handedOver(ctx context.Context, s Scope, rel *release.Release) (bool, error) {
	c := o.core
	d, err := c.driver(s)
	if err != nil {
		return false, err
	}
	rec, err := d.Records().Get(ctx, records.RecordName(rel.Name, rel.Version), metav1.GetOptions{})
	if err != nil {
		return false, client.IgnoreNotFound(err)
	}
	return guard.Claims(rec.Annotations[guard.AnnotationValuesFor], guard.ClaimRef(s.Owner.GVK.GroupKind(), s.Owner.Key.Name)), nil
}

// provesOwner says why live does not say it is the scope's owner's; "" when it does. An object
// of a claimed release needs to say nothing, but must not be another rudder release's.
func provesOwner(live *metav1.PartialObjectMetadata, s Scope, claimed bool) string {
	if claimed {
		if live.GetAnnotations()[records.AnnotationOwner] == "" {
			return ""
		}
		return guard.NotMadeBy(live.GetAnnotations(), guard.OwnerOf(s.Owner))
	}
	for _, r := range live.OwnerReferences {
		if r.UID == s.Owner.UID {
			return ""
		}
	}
	want := s.Owner.Key.Namespace + "/" + s.Owner.Key.Name
	kind := guard.KindEntry(s.Owner.GVK.GroupKind())
	a := live.GetAnnotations()
	if a[AnnotationPrimaryResource] == want && a[AnnotationPrimaryResourceType] == kind {
		return ""
	}
	if len(live.OwnerReferences) > 0 {
		return fmt.Sprintf("has no owner reference to this %s (uid %s), only to %s %s", s.Owner.GVK.Kind, s.Owner.UID,
			live.OwnerReferences[0].Kind, live.OwnerReferences[0].Name)
	}
	return fmt.Sprintf("has neither an owner reference to this %s (uid %s) nor the annotations %s: %s and %s: %s", s.Owner.GVK.Kind,
		s.Owner.UID, AnnotationPrimaryResource, want, AnnotationPrimaryResourceType, kind)
}

// AdoptForeign takes release name over on proof p (Proof.Why ""): each object p read gets
// rudder's marks, on the condition that it is as p read it, and every record of the release
// the labels (records.Labels) labels. Written as the scope's identity within its confinement;
// nothing is created, deleted or recreated, and no revision is made.
func (o *Owners) AdoptForeign(ctx context.Context, s Scope, name string, p *Proof, labels map[string]string) error {
	c := o.core
	// The owner's marks are what this writes: the guard holds it to the confinement, and the
	// resourceVersion of each patch to the object p proved.
	if _, err := o.markProven(ctx, s, p.Objects); err != nil {
		return err
	}
	// The records: rudder's labels, and the marks its post-renderer gives a release's objects
	// on every revision's manifest and hooks, so that a helm rollback to a revision the other
	// operator made keeps them.
	st, revisions, err := c.history(ctx, s, name)
	if err != nil {
		return err
	}
	for _, rel := range revisions {
		if rel.Labels == nil {
			rel.Labels = map[string]string{}
		}
		maps.Copy(rel.Labels, labels)
		if err := o.markRecord(st, rel, s.Owner); err != nil {
			return err
		}
	}
	return nil
}

// markProven writes the scope's owner's marks (rudder's label and owner annotation) on objs,
// each on the condition that it is still at the resourceVersion it carries, the one its proof
// read, and names those it marked.
func (o *Owners) markProven(ctx context.Context, s Scope, objs []*unstructured.Unstructured) ([]string, error) {
	c := o.core
	w, err := c.confinedWriter(ctx, s)
	if err != nil {
		return nil, err
	}
	mark := guard.OwnerOf(s.Owner)
	var marked []string
	for _, o := range objs {
		if err := markLive(ctx, w, o, o.GetResourceVersion(), map[string]any{records.LabelManaged: "true"},
			map[string]any{records.AnnotationOwner: mark}); err != nil {
			return marked, fmt.Errorf("marking %s: %w", Describe(o), err)
		}
		marked = append(marked, Describe(o))
	}
	return marked, nil
}

// markRecord stores rel with the marks rudder's post-renderer gives owner's objects on its
// manifest and hooks.
func (o *Owners) markRecord(st *storage.Storage, rel *release.Release, owner guard.Owner) error {
	c := o.core
	post, mark := &postRenderer{owner: owner}, guard.OwnerOf(owner)
	return rewriteRecord(st, rel, func(obj map[string]any) bool {
		u := &unstructured.Unstructured{Object: obj}
		m, err := c.mapper.RESTMapping(u.GroupVersionKind().GroupKind(), u.GroupVersionKind().Version)
		post.mark(u, mark, err == nil && m.Scope.Name() == meta.RESTScopeNameNamespace)
		return true
	})
}

// ChartFingerprint is a hash of what a chart renders from: its name and version, templates,
// default values, schema and other files ("" for none). A chart decoded from a release record
// and the same chart loaded from its files have the same fingerprint.
func ChartFingerprint(ch *chart.Chart) string {
	if ch == nil || ch.Metadata == nil {
		return ""
	}
	h := sha256.New()
	fmt.Fprintf(h, "%s\x00%s\x00", ch.Metadata.Name, ch.Metadata.Version)
	for _, files := range [][]string{fileDigests(ch.Templates), fileDigests(ch.Files)} {
		for _, f := range files {
			fmt.Fprintf(h, "%s\x00", f)
		}
		h.Write([]byte{1})
	}
	vals, _ := json.Marshal(ch.Values)
	h.Write(vals)
	h.Write(ch.Schema)
	return hex.EncodeToString(h.Sum(nil))
}

func fileDigests(files []*common.File) []string {
	out := make([]string, 0, len(files))
	for _, f := range files {
		sum := sha256.Sum256(f.Data)
		out = append(out, f.Name+"="+hex.EncodeToString(sum[:]))
	}
	sort.Strings(out)
	return out
}
