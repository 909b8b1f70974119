package cli

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/restmapper"
)

// The day-2 verbs' view of a cluster (get, reconcile, suspend, resume, history, rollback,
// tree): kubectl's flags and kind names, and the CRs of the kinds rudder serves.

// Category is the CRD category of the kinds rudder serves: the built-in kinds' CRDs and those
// `rudder scaffold` writes carry it, so that `kubectl get rudder` and `rudder get` list their
// CRs. A kind whose CRD lacks it is named on the command line.
const Category = "rudder"

// clusterFlags are kubectl's connection flags (--kubeconfig, --context, -n, …: cli-runtime's
// ConfigFlags) and -A.
type clusterFlags struct {
	config        *genericclioptions.ConfigFlags
	allNamespaces bool
}

// addClusterFlags puts kubectl's connection flags on cmd; withAll adds -A.
func addClusterFlags(cmd *cobra.Command, withAll bool) *clusterFlags {
	f := &clusterFlags{config: genericclioptions.NewConfigFlags(true)}
	f.config.AddFlags(cmd.Flags())
	if withAll {
		cmd.Flags().BoolVarP(&f.allNamespaces, "all-namespaces", "A", false, "across every namespace (-n is ignored)")
	}
	return f
}

// cluster is a connection to the API server, as clusterFlags say.
type cluster struct {
	dyn    dynamic.Interface
	cs     kubernetes.Interface
	disco  discovery.CachedDiscoveryInterface
	mapper meta.RESTMapper
	// namespace is the namespace of -n (or the kubeconfig's), "" with -A.
	namespace string
}

func (f *clusterFlags) connect() (*cluster, error) {
	cfg, err := f.config.ToRESTConfig()
	if err != nil {
		return nil, fmt.Errorf("connecting to the cluster: %w", err)
	}
	c := &cluster{}
	if c.dyn, err = dynamic.NewForConfig(cfg); err != nil {
		return nil, err
	}
	if c.cs, err = kubernetes.NewForConfig(cfg); err != nil {
		return nil, err
	}
	if c.disco, err = f.config.ToDiscoveryClient(); err != nil {
		return nil, err
	}
	if c.mapper, err = f.config.ToRESTMapper(); err != nil {
		return nil, err
	}
	if !f.allNamespaces {
		if c.namespace, _, err = f.config.ToRawKubeConfigLoader().Namespace(); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// kind is a kind of CR, as the cluster serves it.
type kind struct {
	gvk schema.GroupVersionKind
	gvr schema.GroupVersionResource
}

// String is the kind as kubectl names a resource: resource.group.
func (k kind) String() string { return k.gvr.GroupResource().String() }

// kind resolves a kind named as kubectl takes it: NginxOperator, nginxoperators, a short name,
// or resource.version.group to pick among kinds of one name.
func (c *cluster) kind(name string) (kind, error) {
	full, gr := schema.ParseResourceArg(strings.ToLower(name))
	var gvr schema.GroupVersionResource
	var err error
	if full != nil {
		gvr, err = c.mapper.ResourceFor(*full)
	}
	if full == nil || err != nil {
		gvr, err = c.mapper.ResourceFor(gr.WithVersion(""))
	}
	if err != nil {
		if meta.IsNoMatchError(err) {
			return kind{}, fmt.Errorf("the cluster serves no kind %q", name)
		}
		return kind{}, err
	}
	gvk, err := c.mapper.KindFor(gvr)
	if err != nil {
		return kind{}, err
	}
	return kind{gvk: gvk, gvr: gvr}, nil
}

// servedKinds are the kinds whose CRDs carry Category, sorted by name.
func (c *cluster) servedKinds() ([]kind, error) {
	grs, _ := restmapper.NewDiscoveryCategoryExpander(c.disco).Expand(Category)
	var out []kind
	for _, gr := range grs {
		k, err := c.kind(gr.String())
		if err != nil {
			return nil, err
		}
		out = append(out, k)
	}
	slices.SortFunc(out, func(a, b kind) int { return cmp.Compare(a.String(), b.String()) })
	return slices.CompactFunc(out, func(a, b kind) bool { return a.gvr == b.gvr }), nil
}

// kinds are the kinds arg names ("": every kind rudder serves).
func (c *cluster) kinds(arg string) ([]kind, error) {
	if arg != "" {
		k, err := c.kind(arg)
		return []kind{k}, err
	}
	ks, err := c.servedKinds()
	if err == nil && len(ks) == 0 {
		err = fmt.Errorf("the cluster serves no kind of category %q: name the kind (rudder get KIND)", Category)
	}
	return ks, err
}

// namespaced is the kind's client in the cluster's namespace ("" with -A: every namespace).
func (c *cluster) namespaced(k kind) dynamic.ResourceInterface {
	return c.dyn.Resource(k.gvr).Namespace(c.namespace)
}

// get reads one CR, with an error that names it.
func (c *cluster) get(ctx context.Context, k kind, name string) (*unstructured.Unstructured, error) {
	if c.namespace == "" {
		return nil, usagef("a CR is named in one namespace: -n, not -A")
	}
	cr, err := c.namespaced(k).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("%s %s/%s not found", k.gvk.Kind, c.namespace, name)
	}
	if err != nil {
		return nil, fmt.Errorf("reading %s %s/%s: %w", k.gvk.Kind, c.namespace, name, err)
	}
	return cr, nil
}

// list is every CR of k in the cluster's namespace, sorted by namespace and name.
func (c *cluster) list(ctx context.Context, k kind) (*unstructured.UnstructuredList, error) {
	l, err := c.namespaced(k).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("listing %s: %w", k, err)
	}
	slices.SortFunc(l.Items, func(a, b unstructured.Unstructured) int {
		return cmp.Or(cmp.Compare(a.GetNamespace(), b.GetNamespace()), cmp.Compare(a.GetName(), b.GetName()))
	})
	return l, nil
}

// crName is a CR as the verbs' messages name it: Kind/namespace/name.
func crName(cr *unstructured.Unstructured) string {
	return fmt.Sprintf("%s/%s/%s", cr.GetKind(), cr.GetNamespace(), cr.GetName())
}

// errNotServed: a verb on a CR rudder has not reconciled (no status of rudder's).
var errNotServed = errors.New("rudder has not reconciled it yet (no status.release): is its kind in watches.yaml?")
