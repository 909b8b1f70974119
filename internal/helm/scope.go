package helm

import (
	"helm.sh/helm/v3/pkg/chart"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apiserver/pkg/authentication/serviceaccount"
	"maps"
)

// Scope is who acts for a release and where it may act.
type Scope struct {
	// Confinement holds every request Helm makes for the release; its Namespace is the
	// owner's and the release's.
	Confinement
	// ServiceAccount, when set, is the ServiceAccount of the owner's namespace that every
	// request made for the release impersonates (Flux's multi-tenancy model): the render's
	// lookups, Helm's reads and writes of objects, hooks and CRDs, its release storage, drift
	// re-apply and uninstall. Empty: rudder's own identity.
	ServiceAccount string
}

// Request is everything an install or upgrade needs.
type Request struct {
	Owner Owner
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
	// Carried are the owner's labels that shards select on (see shard.go), put on the
	// release records and on every rendered object.
	Carried map[string]string

	// Objects is filled in by a successful Install or Upgrade: the identities of the new
	// revision's objects, as ParseIdentities would find them in its manifest, known from the
	// post-render without reading the manifest again.
	Objects []*unstructured.Unstructured
}

func (r *Request) postRenderer(mapper meta.RESTMapper) *postRenderer {
	return &postRenderer{owner: r.Owner, conf: r.Scope.Confinement, scoper: newScoper(mapper, r.Chart), carried: r.Carried}
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
		LabelOwnerUID:     string(r.Owner.UID),
		LabelOwnerKind:    KindLabel(r.Owner.GVK.GroupKind()),
		LabelChartDigest:  LabelDigest(r.ChartDigest),
		LabelValuesDigest: r.ValuesDigest,
	}
	maps.Copy(l, r.Carried)
	return l
}
