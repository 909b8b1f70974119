package helm

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/go-logr/logr"
	"helm.sh/helm/v4/pkg/action"
	"helm.sh/helm/v4/pkg/kube"
	release "helm.sh/helm/v4/pkg/release/v1"
	"helm.sh/helm/v4/pkg/storage"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rudder-operator/rudder/internal/guard"
	"github.com/rudder-operator/rudder/internal/records"
	"github.com/rudder-operator/rudder/internal/render"
)

// ClientOptions configure a Client. Config and Mapper are required.
type ClientOptions struct {
	// Config is rudder's own identity; scopes with a ServiceAccount impersonate it from there.
	Config *rest.Config
	Mapper meta.RESTMapper
	// Scheme of the typed objects drift re-apply writes (default client-go's).
	Scheme *runtime.Scheme
	// Renderer renders the releases' charts (default: the process's shared pool).
	Renderer *render.Pool
	// Records is a cache of release records, as ReleaseSecret and indexed by
	// IndexReleaseSecrets: what Head reads (nil: Head fails, and callers read storage), and
	// what an upgrade's reads of its release's history go through (see records.QueryMode).
	Records client.Reader
	// Foreign is a cache of the release records rudder did not make (ForeignRecords), as
	// Records: with both, an install's check that its name is free costs no request. It must
	// hold every such record rudder could meet: set it only where Records holds every record
	// rudder made in the namespaces it serves (not with a shard's selector).
	Foreign client.Reader
	Log     logr.Logger
}

// Client runs Helm actions and reads their releases, as five views by what their callers
// need: History reads a release's revisions; Actions runs Helm's actions on it; Owners proves,
// adopts, marks and lets go of releases and their objects; Records writes the release's records
// beside an action (unlock, supersede, labels); Objects writes operands.
//
// Each action gets a configuration of its own, made for its scope: the scope's identity, and a
// guard on every request (see guard). What is worth keeping across actions is shared by the
// views: the release storage per (namespace, identity), discovery, the cluster's capabilities.
// Safe for concurrent use; callers must not run two actions on the same release at once
// (controller-runtime never reconciles one CR in two workers).
type Client struct {
	History *History
	Actions *Actions
	Owners  *Owners
	Records *Records
	Objects *Objects
}

// History reads a release's revisions.
type History struct{ core *core }

// Actions runs Helm's actions: install, upgrade, rollback, uninstall, test.
type Actions struct {
	core *core
	// history is what an install and an upgrade read of the release's newest revision.
	history *History
	render  *renderer
}

// renderer renders a request's chart for an action: offline first (precheck), then for the
// action's own configuration, with lookups through its guard (upstream).
type renderer struct{ core *core }

// Owners proves and takes over releases rudder did not make, marks revisions it did not write,
// and lets go of releases.
type Owners struct{ core *core }

// Records writes a release's records apart from an action: unlock, supersede, labels, facts.
type Records struct{ core *core }

// Objects writes a release's objects as its scope's identity.
type Objects struct{ core *core }

// core is what the views share.
type core struct {
	connections
	clusterInfo
	mapper meta.RESTMapper
	scheme *runtime.Scheme
	// records and foreign are the caches of release records, rudder's and the others (see
	// ClientOptions).
	records client.Reader
	foreign client.Reader
	pool    *render.Pool
	// chartOwn keeps what charts' defaults name for each release (chartrefs.go).
	chartOwn *chartOwnCache
	// server is the API server's URL; prefix its path, which request paths start with.
	server *url.URL
	prefix string
}

// NewClient makes a Client that talks to the cluster of opts.Config.
func NewClient(opts ClientOptions) (*Client, error) {
	if opts.Config == nil || opts.Mapper == nil {
		return nil, errors.New("helm client: Config and Mapper are required")
	}
	disc, err := newDiscovery(opts.Config)
	if err != nil {
		return nil, err
	}
	cs, err := corev1client.NewForConfig(ProtobufConfig(opts.Config))
	if err != nil {
		return nil, err
	}
	scheme := opts.Scheme
	if scheme == nil {
		scheme = clientgoscheme.Scheme
	}
	pool := opts.Renderer
	if pool == nil {
		if pool, err = render.Default(); err != nil {
			return nil, err
		}
	}
	// The API server's URL as client-go makes it of the host (a scheme added when it has none).
	u, _, err := rest.DefaultServerUrlFor(opts.Config)
	if err != nil {
		return nil, fmt.Errorf("helm client: API server URL: %w", err)
	}
	c := &core{
		connections: connections{cfg: opts.Config, secrets: cs, log: opts.Log,
			drivers: map[identity]*records.Driver{}, writers: map[identity]*http.Client{}, written: records.NewWritten()},
		clusterInfo: clusterInfo{disc: disc},
		mapper:      opts.Mapper, scheme: scheme, records: opts.Records, foreign: opts.Foreign, pool: pool, chartOwn: newChartOwnCache(),
		server: u, prefix: strings.TrimSuffix(u.Path, "/"),
	}
	history := &History{core: c}
	return &Client{History: history, Actions: &Actions{core: c, history: history, render: &renderer{core: c}},
		Owners: &Owners{core: c}, Records: &Records{core: c}, Objects: &Objects{core: c}}, nil
}

// begin prepares one action of a scope. Every revision it stores is checked first, and
// stamped or described as st says (see checkedDriver).
func (c *core) begin(ctx context.Context, s Scope, st storing) (*run, error) {
	d, err := c.driver(s)
	if err != nil {
		return nil, err
	}
	// The action's record writes outlive its cancellation: Helm marks the revision failed once
	// its context has ended, and that write must land, or the release would stay pending
	// until a later pass unlocks it. Each is one short request; what waits is bound (the
	// guard's requests and Helm's waits end with ctx).
	d = d.WithContext(context.WithoutCancel(ctx))
	if st.query != records.QueryHelm && c.records != nil {
		d = d.WithQueries(st.query, s.Namespace, c.records, c.foreign)
	}
	caps, err := c.capabilities()
	if err != nil {
		return nil, err
	}
	g := guard.New(ctx, s.Confinement, c.mapper, c.prefix, guard.OwnerOf(s.Owner))
	cfg := c.restConfig(s)
	cfg.Wrap(g.Wrap)
	getter := &restClientGetter{cfg: cfg, namespace: s.Namespace, mapper: c.mapper, discovery: c.disc}
	log := c.helmLog(s)
	kc := kube.New(getter)
	kc.SetLogger(log)
	r := &run{scope: s, guard: g, config: cfg, log: c.logger(s)}
	scoper := guard.NewScoper(c.mapper, CRDFiles(st.chart))
	var marker *hookMarker
	if g.OwnerMark() != "" {
		marker = &hookMarker{post: &postRenderer{owner: s.Owner, conf: s.Confinement, scoper: scoper, carried: st.carried}}
	}
	r.records = &checkedDriver{Driver: d, storing: st, marker: marker, check: func(rel *release.Release) error {
		if err := s.CheckRelease(c.mapper, rel, st.chart, st.manifest); err != nil {
			return err
		}
		if st.manifest {
			// A rollback's target was made under the watch as it was: its identities, grants,
			// pod privileges and references are checked as the watch is now (an install's and
			// an upgrade's were, after the render).
			// What the target's chart names with its defaults for this release is its own, as
			// it was when the revision was made (chartrefs.go).
			cs, refs := s, r.references(ctx, c.mapper)
			if rel.Chart != nil {
				own := newChartOwn(ctx, c.pool, caps, &Request{Scope: s, ReleaseName: rel.Name, Chart: rel.Chart}, nil)
				cs, refs = own.scope(), own.references(refs)
			}
			if err := cs.CheckObjectRules(View(rel), refs); err != nil {
				return err
			}
		}
		return r.checkHookOwners(ctx, c.mapper, scoper, rel)
	}}
	store := storage.Init(r.records)
	store.SetLogger(log)
	r.kube = &kubeClient{Client: kc, getter: getter, ctx: ctx, wait: s.Wait}
	r.conf = action.NewConfiguration(action.ConfigurationSetLogger(log))
	r.conf.RESTClientGetter, r.conf.KubeClient, r.conf.Releases, r.conf.Capabilities = getter, r.kube, store, caps
	return r, nil
}

// helm3 gives an install Helm 3's behaviour, which every release rudder makes keeps unless its
// watch says otherwise (apply.go, wait.go): a client-side apply and no wait but for hooks. (Helm
// is given no post-renderer: rudder post-renders the manifest alone before the action, see
// postRenderer, and marks the hooks itself as it stores them.)
func helm3(in *action.Install) {
	in.ServerSideApply, in.WaitStrategy = false, kube.HookOnlyStrategy
}
