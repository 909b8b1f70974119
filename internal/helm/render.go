package helm

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path"
	"sort"
	"strings"

	"helm.sh/helm/v4/pkg/action"
	"helm.sh/helm/v4/pkg/chart/common"
	chart "helm.sh/helm/v4/pkg/chart/v2"
	chartutil "helm.sh/helm/v4/pkg/chart/v2/util"
	release "helm.sh/helm/v4/pkg/release/v1"
	"k8s.io/apimachinery/pkg/api/meta"

	"github.com/rudder-operator/rudder/internal/guard"
	"github.com/rudder-operator/rudder/internal/records"
	view "github.com/rudder-operator/rudder/internal/release"
	"github.com/rudder-operator/rudder/internal/render"
)

// Every render of a release runs out of process (internal/render), bounded in time and
// memory: a template is the CR author's to steer, and a recursion, an endless loop or a huge
// allocation in rudder's process would stop it for everyone. Helm's action is then given a
// chart whose templates are the worker's output, escaped: Helm's own render in rudder's
// process only copies that text (rudder's post-render done: see postRenderer), and everything
// after it (hooks sorted from manifests, NOTES, the checks, the release record) is as before.
// The record stores the chart as it was given, not the rendered one.

// renderChart renders req's chart on a worker, as Helm would render it with opts and caps,
// checks what it made (guard.Confinement.CheckRendered), post-renders its manifests (post;
// see postRenderer.renderFiles), and returns the chart to give Helm's action. up, when set, is
// where the render's lookups go; without it they find nothing. refs resolves what the
// release's objects name that it does not make (nil: nothing is) after the chart's own names
// (own, chartrefs.go; nil: none are).
func renderChart(ctx context.Context, pool *render.Pool, mapper meta.RESTMapper, req *Request, opts common.ReleaseOptions,
	caps *common.Capabilities, up *render.Upstream, refs guard.ReferenceReader, own *chartOwn, post *postRenderer) (*chart.Chart, error) {
	limits := req.Scope.Limits
	job := &render.Job{Chart: render.TreeOf(req.Chart), Values: req.Values, ReleaseOptions: opts, Caps: caps,
		Lookups: up != nil, Post: req.Scope.Post, MaxBytes: 2 * limits.manifestBytes()}
	res, err := pool.Render(ctx, job, limits.renderLimits(), up)
	var ee *render.ExceededError
	switch {
	case errors.As(err, &ee):
		return nil, exceeded(ee, limits)
	case err != nil:
		return nil, err
	}
	// What Helm's action cannot sort it refuses in its own words: it is left to it.
	if manifests, hooks, ok := sortRendered(res.Files, caps); ok {
		contents := make([]string, len(manifests))
		for i, m := range manifests {
			contents[i] = m.Content
		}
		req.manifests = contents
		scope := req.scope()
		if own != nil {
			scope, refs = own.scope(), own.references(refs)
		}
		if err := scope.CheckRendered(mapper, CRDFiles(req.Chart), contents, View(&release.Release{Hooks: hooks}).Hooks, refs); err != nil {
			return nil, err
		}
		if res.Files, err = post.renderFiles(res.Files, manifests, hooks); err != nil {
			return nil, err
		}
	}
	// What Helm's action does to the chart it is given (dependencies processed, import-values
	// merged) it does to the rendered one, which has none: do it to the chart the release
	// record keeps.
	if err := chartutil.ProcessDependencies(req.Chart, req.Values); err != nil {
		return nil, err
	}
	return renderedChart(req.Chart, res), nil
}

// exceeded is the LimitError of a render stopped at a bound.
func exceeded(e *render.ExceededError, limits Limits) error {
	switch e.Bound {
	case render.BoundTimeout:
		return &LimitError{Limit: LimitRenderTimeout, Max: limits.renderLimits().Timeout.String(), What: e.What}
	case render.BoundMemory, render.BoundStack:
		return limitError(LimitRenderMemory, limits.renderLimits().Memory, e.What)
	case render.BoundBudget:
		return limitError(LimitRenderMemory, limits.renderLimits().Memory, e.What+" (rudder's --render-memory-budget)")
	case render.BoundOutput:
		return limitError(LimitManifestBytes, limits.manifestBytes(), e.What+" (twice maxManifestBytes, for the manifest and the hooks)")
	}
	return e
}

// renderedChart is the chart whose templates render to exactly res: one template per output
// file, named so that Helm's engine keys its output as the worker's did, with no
// dependencies, schema or values (the worker applied them), and the crds/ of the charts that
// stayed enabled.
func renderedChart(orig *chart.Chart, res *render.Result) *chart.Chart {
	md := *orig.Metadata
	md.Dependencies = nil
	out := &chart.Chart{Metadata: &md}
	prefix := orig.Name() + "/"
	names := make([]string, 0, len(res.Files))
	for k := range res.Files {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		out.Templates = append(out.Templates, &common.File{Name: strings.TrimPrefix(k, prefix), Data: []byte(escapeTemplate(res.Files[k]))})
	}
	for i, crd := range res.CRDs {
		out.Files = append(out.Files, &common.File{Name: fmt.Sprintf("crds/%03d-%s", i, path.Base(crd.Name)), Data: crd.Data})
	}
	return out
}

// escapeTemplate is text as a Go template that renders to exactly that text.
func escapeTemplate(text string) string {
	return strings.ReplaceAll(text, "{{", "{{`{{`}}")
}

// upstream is where the lookups of a render for run r go: held to the read rule (internal/guard, lookups.go),
// then through r's guard, as r's identity.
func (rd *renderer) upstream(r *run) (*render.Upstream, *guard.Lookups, error) {
	c := rd.core
	hc, err := c.httpClient(r.scope)
	if err != nil {
		return nil, nil, err
	}
	l := guard.NewLookups(r.guard, r.scope.Limits.lookups())
	return &render.Upstream{URL: c.server, Transport: l.Wrap(r.guard.Wrap(hc.Transport))}, l, nil
}

// hasHooks reports whether any template of the chart or its subcharts can render a hook.
func hasHooks(ch *chart.Chart) bool {
	for _, t := range ch.Templates {
		if bytes.Contains(t.Data, hookAnnotation) {
			return true
		}
	}
	for _, d := range ch.Dependencies() {
		if hasHooks(d) {
			return true
		}
	}
	return false
}

// hookAnnotation is what marks a template's object as a Helm hook.
var hookAnnotation = []byte("helm.sh/hook")

// Render renders a release as Install would, without a cluster (`helm template`): lookups
// find nothing; caps, when set, are the capabilities to render with (else Helm's defaults);
// mapper tells the scope of kinds (the chart's crds/ add theirs). The release it returns has
// the manifest post-rendered as rudder applies it — labels, owner annotation and owner
// references — and the hooks, all checked against the request's confinement.
func Render(req *Request, mapper meta.RESTMapper, caps *common.Capabilities) (*view.Release, error) {
	pool, err := render.Default()
	if err != nil {
		return nil, err
	}
	return viewOf(renderOffline(context.Background(), pool, req, mapper, caps, nil))
}

// renderOffline renders as Render does; cache keeps the chart's own names (nil: not kept).
func renderOffline(ctx context.Context, pool *render.Pool, req *Request, mapper meta.RESTMapper, caps *common.Capabilities,
	cache *chartOwnCache) (*release.Release, error) {
	// The capabilities a client-only install renders with.
	rc := common.DefaultCapabilities.Copy()
	if caps != nil {
		rc.KubeVersion = caps.KubeVersion
		rc.APIVersions = append(rc.APIVersions, caps.APIVersions...)
	}
	rendered, err := renderChart(ctx, pool, mapper, req,
		common.ReleaseOptions{Name: req.ReleaseName, Namespace: req.Scope.Namespace, Revision: 1, IsInstall: true}, rc, nil, nil,
		newChartOwn(ctx, pool, rc, req, cache), req.postRenderer(mapper))
	if err != nil {
		return nil, err
	}
	in := action.NewInstall(action.NewConfiguration(action.ConfigurationSetLogger(slog.DiscardHandler)))
	helm3(in)
	in.SkipSchemaValidation = true // validated by the render
	in.DryRunStrategy, in.Replace = action.DryRunClient, true
	in.ReleaseName = req.ReleaseName
	in.Namespace = req.Scope.Namespace
	in.Labels = req.Labels()
	in.Description = req.Description
	in.DisableOpenAPIValidation = true
	if caps != nil {
		kv := caps.KubeVersion
		in.KubeVersion = &kv
		in.APIVersions = caps.APIVersions
	}
	rel, err := records.V1Of(in.Run(rendered, req.Values))
	if err != nil {
		return nil, err
	}
	rel.Chart = req.Chart
	if err := req.Scope.CheckRelease(mapper, rel, req.Chart, false); err != nil {
		return nil, err
	}
	return rel, nil
}
