package helm

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"sync"

	"github.com/go-logr/logr"
	"helm.sh/helm/v4/pkg/action"
	"helm.sh/helm/v4/pkg/chart/common"
	"helm.sh/helm/v4/pkg/storage"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/discovery"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"

	"github.com/rudder-operator/rudder/internal/records"
)

// What the Client keeps beside its actions: a connection to the API server per identity that
// acts (rudder's own, or a ServiceAccount a watch names) and namespace, and what it read of the
// cluster once.

// connections are the Client's per identity and namespace: the release storage as that
// identity, its HTTP client, its log. Each is made once.
type connections struct {
	cfg *rest.Config
	// secrets serves the release storage of every namespace for rudder's own identity.
	secrets corev1client.SecretsGetter
	log     logr.Logger

	mu      sync.Mutex
	drivers map[identity]*records.Driver
	// written is what the drivers wrote of release records that the cache of records may not
	// show yet (see Head).
	written *records.Written
	writers map[identity]*http.Client
}

// clusterInfo is what the Client reads of the cluster once: its capabilities.
type clusterInfo struct {
	disc discovery.CachedDiscoveryInterface
	mu   sync.Mutex
	caps *common.Capabilities
}

// identity is who acts in a namespace: rudder ("") or one of its ServiceAccounts.
type identity struct{ namespace, serviceAccount string }

// restConfig is the configuration of a scope's identity (without the guard).
func (c *connections) restConfig(s Scope) *rest.Config {
	cfg := rest.CopyConfig(c.cfg)
	if u := s.User(); u != "" {
		// The API server adds the ServiceAccount's groups itself.
		cfg.Impersonate = rest.ImpersonationConfig{UserName: u}
	}
	return cfg
}

// driver is the release storage of a namespace as the scope's identity, built once.
func (c *connections) driver(s Scope) (*records.Driver, error) {
	id := identity{s.Namespace, s.ServiceAccount}
	c.mu.Lock()
	defer c.mu.Unlock()
	if d, ok := c.drivers[id]; ok {
		return d, nil
	}
	secrets := c.secrets
	if s.ServiceAccount != "" {
		cs, err := corev1client.NewForConfig(ProtobufConfig(c.restConfig(s)))
		if err != nil {
			return nil, err
		}
		secrets = cs
	}
	d := records.NewDriver(secrets.Secrets(s.Namespace))
	d.SetLogger(c.helmLog(s))
	d.MemoKey = s.Namespace + "/" + s.ServiceAccount
	d.Track(s.Namespace, c.written)
	c.drivers[id] = d
	return d, nil
}

// logger is the log of a scope's actions.
func (c *connections) logger(s Scope) logr.Logger {
	log := c.log.WithName("helm").WithValues("namespace", s.Namespace)
	if s.ServiceAccount != "" {
		log = log.WithValues("serviceAccount", s.ServiceAccount)
	}
	return log
}

// helmLog is Helm's log of a scope's actions: the scope's logger, Helm's debug lines at V(4)
// (logr's mapping of slog's levels).
func (c *connections) helmLog(s Scope) slog.Handler { return logr.ToSlogHandler(c.logger(s)) }

// capabilities are the cluster's, read once (Helm would invalidate discovery and read them at
// every action); installing CRDs forgets them.
func (c *clusterInfo) capabilities() (*common.Capabilities, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.caps != nil {
		return c.caps, nil
	}
	kv, err := c.disc.ServerVersion()
	if err != nil {
		return nil, fmt.Errorf("reading the server version: %w", err)
	}
	apis, err := action.GetVersionSet(c.disc)
	if err != nil && !discovery.IsGroupDiscoveryFailedError(err) {
		return nil, fmt.Errorf("reading the served API versions: %w", err)
	}
	c.caps = &common.Capabilities{
		APIVersions: apis,
		KubeVersion: common.KubeVersion{Version: kv.GitVersion, Major: kv.Major, Minor: kv.Minor},
		HelmVersion: common.DefaultCapabilities.HelmVersion,
	}
	return c.caps, nil
}

func (c *clusterInfo) forgetCapabilities() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.caps = nil
	c.disc.Invalidate()
}

// httpClient is the HTTP client of a scope's identity (its connections), made once per
// (namespace, ServiceAccount). Requests made through it for a release go through a guard.
func (c *connections) httpClient(s Scope) (*http.Client, error) {
	id := identity{s.Namespace, s.ServiceAccount}
	c.mu.Lock()
	defer c.mu.Unlock()
	if hc, ok := c.writers[id]; ok {
		return hc, nil
	}
	hc, err := rest.HTTPClientFor(c.restConfig(s))
	if err != nil {
		return nil, err
	}
	c.writers[id] = hc
	return hc, nil
}

// storageOf is the release storage of a scope, for reads and rudder's own record updates.
func (c *connections) storageOf(ctx context.Context, s Scope) (*storage.Storage, error) {
	d, err := c.driver(s)
	if err != nil {
		return nil, err
	}
	st := storage.Init(d.WithContext(ctx))
	st.SetLogger(d.Logger().Handler())
	return st, nil
}

// known are the cluster's capabilities when they were read (nil: not yet).
func (c *clusterInfo) known() *common.Capabilities {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.caps
}

// ProtobufConfig is cfg for a client of built-in types in protobuf, as Kubernetes' own
// controllers talk to the API server. The release storage's Secrets client uses it: a record
// travels twice per write (the request, and the Secret the API server sends back); JSON
// base64-encodes its payload again each way, and decoding it was a few percent of rudder's CPU
// per install. The records themselves, and every reader's view of them, are the same.
func ProtobufConfig(cfg *rest.Config) *rest.Config {
	cfg = rest.CopyConfig(cfg)
	cfg.ContentType = runtime.ContentTypeProtobuf
	cfg.AcceptContentTypes = runtime.ContentTypeProtobuf + "," + runtime.ContentTypeJSON
	return cfg
}
