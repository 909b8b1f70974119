package helm

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/go-logr/logr"
	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/kube"
	"helm.sh/helm/v3/pkg/release"
	"helm.sh/helm/v3/pkg/storage"
	"helm.sh/helm/v3/pkg/storage/driver"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/kubernetes"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
)

// Request is everything an install or upgrade needs.
type Request struct {
	Owner       Owner
	ReleaseName string
	// Chart must be a private copy: Helm may modify the chart it is given.
	Chart        *chart.Chart
	ChartDigest  string
	Values       map[string]any
	ValuesDigest string
	Confinement  Confinement
	MaxHistory   int
	Description  string
}

func (r *Request) labels() map[string]string {
	return map[string]string{
		LabelOwnerUID:     string(r.Owner.UID),
		LabelOwnerKind:    KindLabel(r.Owner.GVK.GroupKind()),
		LabelChartDigest:  ShortDigest(r.ChartDigest),
		LabelValuesDigest: r.ValuesDigest,
	}
}

// Client runs Helm actions. One action.Configuration per namespace, built on first use.
// Safe for concurrent use; callers must not run two actions on the same release at once
// (controller-runtime never reconciles one CR in two workers).
type Client struct {
	cfg    *rest.Config
	mapper meta.RESTMapper
	disc   discovery.CachedDiscoveryInterface
	// secrets serves the release storage of every namespace.
	secrets corev1client.SecretsGetter
	log     logr.Logger

	mu    sync.Mutex
	confs map[string]*action.Configuration
}

// NewClient makes a Client that talks to the cluster of cfg, resolving kinds with mapper.
func NewClient(cfg *rest.Config, mapper meta.RESTMapper, log logr.Logger) (*Client, error) {
	disc, err := newDiscovery(cfg)
	if err != nil {
		return nil, err
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	return &Client{cfg: cfg, mapper: mapper, disc: disc, secrets: cs.CoreV1(), log: log, confs: map[string]*action.Configuration{}}, nil
}

func (c *Client) config(ns string) (*action.Configuration, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if conf, ok := c.confs[ns]; ok {
		return conf, nil
	}
	conf := new(action.Configuration)
	getter := &restClientGetter{cfg: c.cfg, namespace: ns, mapper: c.mapper, discovery: c.disc}
	log := c.log.WithName("helm").WithValues("namespace", ns)
	debug := func(format string, v ...any) { log.V(2).Info(strings.TrimSpace(fmt.Sprintf(format, v...))) }
	if err := conf.Init(getter, ns, "secret", debug); err != nil {
		return nil, fmt.Errorf("helm configuration for namespace %s: %w", ns, err)
	}
	// Helm's Secret storage, with rudder's encoder (see secretsDriver).
	d := newSecretsDriver(c.secrets.Secrets(ns))
	d.Log = debug
	conf.Releases = storage.Init(d)
	conf.Releases.Log = debug
	if kc, ok := conf.KubeClient.(*kube.Client); ok {
		conf.KubeClient = kubeClient{kc}
	}
	c.confs[ns] = conf
	return conf, nil
}

// kubeClient is Helm's kube client without the reachability probe Helm runs before every
// action (a GET /version each time): rudder's watches depend on the API server anyway, and an
// unreachable one fails the action's first request with an error that says so. Every other
// method, and every optional interface Helm asserts (three-way merge, deletion propagation,
// …), is Helm's own.
type kubeClient struct{ *kube.Client }

func (kubeClient) IsReachable() error { return nil }

// Last is the newest revision of a release, or nil when there is none.
func (c *Client) Last(ns, name string) (*release.Release, error) {
	conf, err := c.config(ns)
	if err != nil {
		return nil, err
	}
	rel, err := conf.Releases.Last(name)
	if errors.Is(err, driver.ErrReleaseNotFound) {
		return nil, nil
	}
	return rel, err
}

// LastDeployed is the newest revision whose status is deployed or superseded (the one a
// rollback returns to), or nil.
func (c *Client) LastDeployed(ns, name string, before int) (*release.Release, error) {
	conf, err := c.config(ns)
	if err != nil {
		return nil, err
	}
	hist, err := conf.Releases.History(name)
	if errors.Is(err, driver.ErrReleaseNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var best *release.Release
	for _, r := range hist {
		if r.Version >= before {
			continue
		}
		if s := r.Info.Status; s != release.StatusDeployed && s != release.StatusSuperseded {
			continue
		}
		if best == nil || r.Version > best.Version {
			best = r
		}
	}
	return best, nil
}

// History lists every stored revision, oldest first.
func (c *Client) History(ns, name string) ([]*release.Release, error) {
	conf, err := c.config(ns)
	if err != nil {
		return nil, err
	}
	hist, err := conf.Releases.History(name)
	if errors.Is(err, driver.ErrReleaseNotFound) {
		return nil, nil
	}
	return hist, err
}

// ErrNameInUse: Install found a release of that name in storage and wrote nothing.
var ErrNameInUse = errors.New("a release of that name exists")

// helmNameInUse is the message of the error Helm's install returns when its own (uncached)
// look at storage finds the name taken; it has no typed error for it.
const helmNameInUse = "cannot re-use a name that is still in use"

// Install installs a new release. It does not wait for readiness: the reconciler reports it.
// When storage already holds a release of that name (Helm checks before it writes anything),
// the error wraps ErrNameInUse and nothing was changed.
func (c *Client) Install(ctx context.Context, req *Request) (*release.Release, error) {
	conf, err := c.config(req.Owner.Key.Namespace)
	if err != nil {
		return nil, err
	}
	in := action.NewInstall(conf)
	in.ReleaseName = req.ReleaseName
	in.Namespace = req.Owner.Key.Namespace
	in.Labels = req.labels()
	in.Description = req.Description
	in.PostRenderer = &postRenderer{owner: req.Owner, conf: req.Confinement, mapper: c.mapper}
	in.DisableOpenAPIValidation = skipClientValidation
	rel, err := in.RunWithContext(ctx, req.Chart, req.Values)
	if err != nil && (errors.Is(err, driver.ErrReleaseExists) || strings.Contains(err.Error(), helmNameInUse)) {
		// The second: the name check read nothing (Helm goes on when its read fails) and
		// storing revision 1 found it there.
		return nil, fmt.Errorf("%w: %w", ErrNameInUse, err)
	}
	return rel, err
}

// skipClientValidation turns off Helm's client-side "OpenAPI validation". Against an API server
// with server-side field validation (GA since Kubernetes 1.27) kubectl's validator validates
// nothing on the client: it only asks whether the server supports the fieldValidation
// parameter, and answers that by fetching and parsing the group's whole OpenAPI v3 document on
// every install and upgrade — most of rudder's CPU per release action when it was on. The API
// server still validates every object Helm creates or patches.
const skipClientValidation = true

// Upgrade makes a new revision of an existing release.
func (c *Client) Upgrade(ctx context.Context, req *Request) (*release.Release, error) {
	conf, err := c.config(req.Owner.Key.Namespace)
	if err != nil {
		return nil, err
	}
	up := action.NewUpgrade(conf)
	up.Namespace = req.Owner.Key.Namespace
	up.Labels = req.labels()
	up.Description = req.Description
	up.MaxHistory = req.MaxHistory
	up.PostRenderer = &postRenderer{owner: req.Owner, conf: req.Confinement, mapper: c.mapper}
	up.DisableOpenAPIValidation = skipClientValidation
	return up.RunWithContext(ctx, req.ReleaseName, req.Chart, req.Values)
}

// Rollback returns a release to revision toRevision, as a new revision.
func (c *Client) Rollback(ns, name string, toRevision, maxHistory int) error {
	conf, err := c.config(ns)
	if err != nil {
		return err
	}
	rb := action.NewRollback(conf)
	rb.Version = toRevision
	rb.MaxHistory = maxHistory
	return rb.Run(name)
}

// Uninstall removes a release and the objects it made. A release that is already gone is not
// an error.
func (c *Client) Uninstall(ns, name, description string) error {
	conf, err := c.config(ns)
	if err != nil {
		return err
	}
	un := action.NewUninstall(conf)
	un.Description = description
	_, err = un.Run(name)
	if errors.Is(err, driver.ErrReleaseNotFound) {
		return nil
	}
	return err
}

// Unlock marks a revision stuck in a pending-* state (its operation died with a previous
// process) as failed, so that Helm accepts new actions on the release.
func (c *Client) Unlock(rel *release.Release) error {
	conf, err := c.config(rel.Namespace)
	if err != nil {
		return err
	}
	rel.SetStatus(release.StatusFailed, fmt.Sprintf("unlocked by rudder: the %s operation that started it is gone", rel.Info.Status))
	return conf.Releases.Update(rel)
}

// Mapping resolves a kind to its resource and scope.
func (c *Client) Mapping(gvk schema.GroupVersionKind) (*meta.RESTMapping, error) {
	return c.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
}
