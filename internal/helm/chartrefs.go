package helm

import (
	"context"
	"strings"
	"sync"

	"helm.sh/helm/v4/pkg/chart/common"
	release "helm.sh/helm/v4/pkg/release/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/lru"

	"github.com/rudder-operator/rudder/internal/guard"
	"github.com/rudder-operator/rudder/internal/render"
)

// What a chart's defaults name after the release is the chart's own, whatever the release is
// called (guard.ChartOwnOf): a release may name such an object although the watch's allowReads
// does not, and a "<release>" entry of allowServiceAccounts or allowRoles stands for such a
// ServiceAccount or role. It is decided per release, by rendering the chart with its defaults
// (and the watch's checkValues, which every CR gives) as this release, in its namespace, with
// the watch's post-renderers and without lookups — and only when a name of the release is not
// allowed otherwise: a chart whose names all resolve renders once, as before. What values add
// beyond the defaults is refused as before.

// chartOwnCacheSize bounds what is kept, one entry per chart digest, release and namespace: a
// fleet's installs and upgrades of one chart edition.
const chartOwnCacheSize = 4096

// chartOwnCache keeps guard.ChartOwnOf by chart digest, release and namespace.
type chartOwnCache struct{ c *lru.Cache }

func newChartOwnCache() *chartOwnCache { return &chartOwnCache{c: lru.New(chartOwnCacheSize)} }

type chartOwnKey struct{ digest, release, namespace string }

// chartOwn is the chart's own names for one request, rendered at most once, when first asked.
type chartOwn struct {
	ctx   context.Context
	pool  *render.Pool
	caps  *common.Capabilities
	req   *Request
	cache *chartOwnCache // nil: not kept (a chart without a digest, the CLI)

	once sync.Once
	own  map[string]bool
}

func newChartOwn(ctx context.Context, pool *render.Pool, caps *common.Capabilities, req *Request, cache *chartOwnCache) *chartOwn {
	return &chartOwn{ctx: ctx, pool: pool, caps: caps, req: req, cache: cache}
}

// has reports whether entry is the chart's own for the request's release.
func (o *chartOwn) has(entry string) bool {
	o.once.Do(o.load)
	return o.own[entry]
}

// scope is the request's scope naming the release, its confinement asking o for the chart's
// own identities and roles.
func (o *chartOwn) scope() Scope {
	s := o.req.scope()
	s.ChartOwn = o.has
	return s
}

// references is next (nil: nothing else resolves) with the chart's own references resolved
// first.
func (o *chartOwn) references(next guard.ReferenceReader) guard.ReferenceReader {
	return func(gk schema.GroupKind, ns, name string) (bool, error) {
		if ns == o.req.Scope.Namespace && strings.Contains(name, o.req.ReleaseName) && o.has(guard.OwnRead(gk, name)) {
			return true, nil
		}
		if next == nil {
			return false, nil
		}
		return next(gk, ns, name)
	}
}

func (o *chartOwn) load() {
	key := chartOwnKey{o.req.ChartDigest, o.req.ReleaseName, o.req.Scope.Namespace}
	keep := o.cache != nil && key.digest != ""
	if keep {
		if v, ok := o.cache.c.Get(key); ok {
			o.own = v.(map[string]bool)
			return
		}
	}
	o.own = o.render()
	if keep && o.ctx.Err() == nil {
		o.cache.c.Add(key, o.own)
	}
}

// render renders the request's chart with its defaults and the scope's checkValues as its
// release and returns guard.ChartOwnOf of it; nothing when the defaults do not render (names
// are then decided as before: refused unless allowed otherwise).
func (o *chartOwn) render() map[string]bool {
	req := o.req
	limits := req.Scope.Limits
	opts := common.ReleaseOptions{Name: req.ReleaseName, Namespace: req.Scope.Namespace, Revision: 1, IsInstall: true}
	job := &render.Job{Chart: render.TreeOf(req.Chart), Values: req.Scope.CheckValues, ReleaseOptions: opts, Caps: o.caps,
		Post: req.Scope.Post, MaxBytes: 2 * limits.manifestBytes()}
	res, err := o.pool.Render(o.ctx, job, limits.renderLimits(), nil)
	if err != nil {
		return nil
	}
	manifests, hooks, ok := sortRendered(res.Files, o.caps)
	if !ok {
		return nil
	}
	var b strings.Builder
	for _, m := range manifests {
		b.WriteString("---\n" + m.Content + "\n")
	}
	rel := &release.Release{Name: req.ReleaseName, Namespace: req.Scope.Namespace, Manifest: b.String(), Hooks: hooks}
	own, err := guard.ChartOwnOf(req.Scope.Namespace, View(rel))
	if err != nil {
		return nil
	}
	return own
}
