package helm

import (
	"context"
	"fmt"
	"slices"

	release "helm.sh/helm/v4/pkg/release/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/rudder-operator/rudder/internal/guard"
	"github.com/rudder-operator/rudder/internal/records"
	view "github.com/rudder-operator/rudder/internal/release"
)

// A person's `helm upgrade` of a release rudder keeps renders the chart without rudder's
// post-renderer: the revision it records, and the objects it applies, lose rudder's marks
// (its owner annotation and label; the apply or the three-way patch takes away what the
// release set before), and the request guard would then refuse every later write to them
// as to objects the release did not make. rudder marks such a revision again, in place, on
// the proof the CLI left: the record continues this CR's release (Helm's upgrade carries the
// labels of the record before it, rudder's owner among them, and only someone who may write
// the namespace's Secrets writes a record), and each object it names that exists carries
// Helm's ownership metadata for this release — Helm's own condition for an object to be the
// release's — and no other owner's mark. The digests Helm's upgrade copied from the record
// before it go: they describe that record's revision.

// Unmarked reports whether an object of objs lacks the mark of the scope's owner: one of a
// revision rudder's post-renderer did not write.
func Unmarked(objs []*unstructured.Unstructured, s Scope) bool {
	mark := guard.OwnerOf(s.Owner)
	return slices.ContainsFunc(objs, func(o *unstructured.Unstructured) bool {
		return o.GetAnnotations()[records.AnnotationOwner] != mark
	})
}

// MarkRevision marks revision version of release name as the scope's owner's, and the objects
// of it that exist (see above), and names those objects; it returns the revision as it stored
// it, marked. Nothing is marked when one of them fails the proof: the error names it and why.
// No revision is made; each object is marked on the condition that it is as read.
func (o *Owners) MarkRevision(ctx context.Context, s Scope, name string, version int) (*view.Release, []string, error) {
	c := o.core
	st, revisions, err := c.history(ctx, s, name)
	if err != nil {
		return nil, nil, err
	}
	i := slices.IndexFunc(revisions, func(r *release.Release) bool { return r.Version == version })
	if i < 0 || revisions[i].Labels[records.LabelOwnerUID] != string(s.Owner.UID) {
		return nil, nil, fmt.Errorf("revision %d of release %s is not this %s's to mark", version, name, s.Owner.GVK.Kind)
	}
	rel := revisions[i]
	objs, err := ParseIdentities(rel.Manifest, s.Namespace, c.mapper)
	if err != nil {
		return nil, nil, fmt.Errorf("reading the objects of revision %d of release %s: %w", version, name, err)
	}
	read, err := c.metadataReader(s)
	if err != nil {
		return nil, nil, err
	}
	mark := guard.OwnerOf(s.Owner)
	var proven []*unstructured.Unstructured
	for _, id := range objs {
		live, err := read(ctx, id)
		switch {
		case err != nil:
			return nil, nil, fmt.Errorf("reading %s of revision %d: %w", Describe(id), version, err)
		case live == nil:
			continue // the drift restore creates it, marked
		}
		a := live.GetAnnotations()
		if a[helmReleaseName] != name || a[helmReleaseNamespace] != s.Namespace {
			return nil, nil, fmt.Errorf("%s of revision %d (not made by rudder) does not carry Helm's metadata of release %s/%s",
				Describe(id), version, s.Namespace, name)
		}
		if a[records.AnnotationOwner] != "" && a[records.AnnotationOwner] != mark {
			return nil, nil, fmt.Errorf("%s of revision %d (not made by rudder) is marked as %s's", Describe(id), version,
				a[records.AnnotationOwner])
		}
		o := id.DeepCopy()
		o.SetResourceVersion(live.GetResourceVersion())
		proven = append(proven, o)
	}
	marked, err := o.markProven(ctx, s, proven)
	if err != nil {
		return nil, marked, err
	}
	// Helm's upgrade copied the digests of the record before it, which say what rudder made
	// that revision from, not this one: without them the revision is one rudder did not make
	// from the spec, kept until the spec or the chart changes.
	delete(rel.Labels, records.LabelChartDigest)
	delete(rel.Labels, records.LabelValuesDigest)
	if err := o.markRecord(st, rel, s.Owner); err != nil {
		return nil, marked, err
	}
	return View(rel), marked, nil
}
