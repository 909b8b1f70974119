package helm

import (
	"maps"

	chart "helm.sh/helm/v4/pkg/chart/v2"
	release "helm.sh/helm/v4/pkg/release/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apiserver/pkg/authentication/serviceaccount"

	"github.com/rudder-operator/rudder/internal/guard"
	"github.com/rudder-operator/rudder/internal/postrender"
	"github.com/rudder-operator/rudder/internal/records"
)

// Scope is who acts for a release and where it may act.
type Scope struct {
	// guard.Confinement holds every request Helm makes for the release; its Namespace is the
	// owner's and the release's.
	guard.Confinement
	// ServiceAccount, when set, is the ServiceAccount of the owner's namespace that every
	// request made for the release impersonates (Flux's multi-tenancy model): the render's
	// lookups, Helm's reads and writes of objects, hooks and CRDs, its release storage, drift
	// re-apply and uninstall. Empty: rudder's own identity.
	ServiceAccount string
	// Owner is the CR the release belongs to. A release changes and deletes only objects
	// marked as this owner's (AnnotationOwner): its own (see internal/guard, ownership.go). Zero only where
	// nothing is applied (rudder template, scaffold).
	Owner guard.Owner
	// Limits bound what the release renders and how long its actions wait.
	Limits Limits
	// Post is what the watch layers on the chart's output (post-renderers, common metadata),
	// applied in the render worker before every check and mark; nil: nothing.
	Post *postrender.Spec
	// Apply is how the release's objects are applied: client-side, as Helm 3 did, unless the
	// watch opts in to server-side apply (see apply.go).
	Apply ApplyPolicy
	// Wait is what its actions wait for besides their hooks (see wait.go).
	Wait WaitPolicy
	// CheckValues are the values every CR of the kind gives at least (the watch's
	// checkValues): with the chart's defaults, what the chart's own references are decided by
	// (see chartrefs.go).
	CheckValues map[string]any
}

// Request is everything an install or upgrade needs.
type Request struct {
	Scope Scope
	// ReleaseName of the release, in Scope.Namespace.
	ReleaseName string
	// Chart must be a private copy: Helm may modify the chart it is given.
	Chart        *chart.Chart
	ChartDigest  string
	Values       map[string]any
	ValuesDigest string
	MaxHistory   int
	Description  string
	// Revision is the revision an Upgrade or a Replace makes (the newest one's number plus
	// one), as the caller knows it from the release's cached head; 0 reads it from storage.
	// An action whose history moved on meanwhile fails before it writes anything, to be
	// retried.
	Revision int
	// Replace: an Install is made over the release's newest revision, a failed install whose
	// record is kept (records.Head.Kept), as revision Revision; Helm leaves the failed record
	// as it is. Without it, an install finds the name in use (ErrNameInUse).
	Replace bool
	// Carried are the owner's labels that shards select on (see shard.go), put on the
	// release records and on every rendered object.
	Carried map[string]string
	// Facts are the release's facts (records.Facts) the new revision's record carries as its
	// own, and FailedFacts those it carries once Helm records it failed; nil: those Helm's
	// upgrade carries over from the newest record.
	Facts, FailedFacts *records.Facts
	// CRDs is what an install (CRDs.Install) or an upgrade (CRDs.Upgrade) does with the chart's
	// crds/; the zero policy creates them on install, as Helm does, and skips them on upgrade.
	CRDs CRDPolicy
	// Force: an upgrade replaces (deletes and creates) the objects whose update the API server
	// refuses because it changes an immutable field.
	Force bool

	// Replaced is filled in by an Upgrade with Force: the objects it replaced. CRDs is filled
	// in by an Install or Upgrade: what it did with crds/, one line per CRD.
	Replaced    []string
	CRDsApplied []string
	// Withheld is filled in by an Install or Upgrade: what its render's lookups read as not
	// found because the release may not read it (see internal/guard, lookups.go).
	Withheld []string

	// Taken is filled in by an Install or Upgrade of a watch with install.takeOwnership: the
	// existing objects that claimed the CR and were taken into the release (see take.go).
	Taken []string
	// manifests are the render's manifests before the post-render, kept for TakeOwnership.
	manifests []string

	// Objects is filled in by a successful Install or Upgrade: the identities of the new
	// revision's objects, as ParseIdentities would find them in its manifest, known from the
	// post-render without reading the manifest again.
	Objects []*unstructured.Unstructured
	// Rendered is filled in with Objects: the same objects whole, one for one, as the
	// post-render wrote them, for the pass that made them to judge before its cache shows
	// them. Not kept.
	Rendered []*unstructured.Unstructured
}

// scope is the request's Scope with its confinement naming the release: what "<release>" in
// allowReads stands for, in the render's checks and its lookups alike.
func (r *Request) scope() Scope {
	s := r.Scope
	s.Release = r.ReleaseName
	return s
}

func (r *Request) postRenderer(mapper meta.RESTMapper) *postRenderer {
	return &postRenderer{owner: r.Scope.Owner, conf: r.Scope.Confinement, scoper: guard.NewScoper(mapper, CRDFiles(r.Chart)),
		carried: r.Carried, limits: r.Scope.Limits, release: r.ReleaseName}
}

// User is the user the scope's requests are made as; "" for rudder's own identity.
func (s Scope) User() string {
	if s.ServiceAccount == "" {
		return ""
	}
	return serviceaccount.MakeUsername(s.Namespace, s.ServiceAccount)
}

// Labels are the labels rudder puts on every revision a request makes (besides LabelRevision,
// which is stamped when the revision is stored).
func (r *Request) Labels() map[string]string {
	l := map[string]string{
		records.LabelOwnerUID:     string(r.Scope.Owner.UID),
		records.LabelOwnerKind:    records.KindLabel(r.Scope.Owner.GVK.GroupKind()),
		records.LabelChartDigest:  records.LabelDigest(r.ChartDigest),
		records.LabelValuesDigest: r.ValuesDigest,
	}
	maps.Copy(l, r.Carried)
	return l
}

// CheckRelease checks a release as Helm is about to store or remove it: its confinement (see
// guard.Confinement.CheckRelease) and its size against the scope's limits.
func (s Scope) CheckRelease(mapper meta.RESTMapper, rel *release.Release, ch *chart.Chart, manifest bool) error {
	if err := s.Limits.checkSize(rel); err != nil {
		return err
	}
	return s.Confinement.CheckRelease(mapper, View(rel), CRDFiles(ch), manifest)
}

// CheckCRDs checks the chart's crds/ against the scope's confinement (see
// guard.Confinement.CheckCRDs).
func (s Scope) CheckCRDs(mapper meta.RESTMapper, ch *chart.Chart) error {
	return s.Confinement.CheckCRDs(mapper, CRDFiles(ch))
}
