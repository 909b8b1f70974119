package helm

import (
	"strings"

	"helm.sh/helm/v4/pkg/chart/common"
	chart "helm.sh/helm/v4/pkg/chart/v2"
	release "helm.sh/helm/v4/pkg/release/v1"
	releaseutil "helm.sh/helm/v4/pkg/release/v1/util"

	"github.com/rudder-operator/rudder/internal/guard"
	view "github.com/rudder-operator/rudder/internal/release"
)

// View is rudder's view of a Helm release (nil for nil): what the packages above the Helm
// layer read of a revision. It keeps rel as its Source, which only this package reads back.
func View(rel *release.Release) *view.Release {
	if rel == nil {
		return nil
	}
	v := &view.Release{Name: rel.Name, Namespace: rel.Namespace, Version: rel.Version,
		Labels: rel.Labels, Manifest: rel.Manifest, Source: rel,
		ServerSideApply: rel.ApplyMethod == string(release.ApplyMethodServerSideApply)}
	if i := rel.Info; i != nil {
		v.Status, v.Description = view.Status(i.Status), i.Description
		v.FirstDeployed, v.LastDeployed, v.Deleted = i.FirstDeployed, i.LastDeployed, i.Deleted
	}
	if rel.Chart != nil && rel.Chart.Metadata != nil {
		m := rel.Chart.Metadata
		v.Chart = view.Chart{Name: m.Name, Version: m.Version, AppVersion: m.AppVersion}
	}
	for _, h := range rel.Hooks {
		vh := &view.Hook{Name: h.Name, Kind: h.Kind, Path: h.Path, Manifest: h.Manifest, Weight: h.Weight,
			LastRun: view.HookRun{StartedAt: h.LastRun.StartedAt, CompletedAt: h.LastRun.CompletedAt, Phase: string(h.LastRun.Phase)}}
		for _, e := range h.Events {
			vh.Events = append(vh.Events, string(e))
		}
		for _, p := range h.DeletePolicies {
			vh.DeletePolicies = append(vh.DeletePolicies, string(p))
		}
		v.Hooks = append(v.Hooks, vh)
	}
	return v
}

// viewOf is View of what a read of storage returned.
func viewOf(rel *release.Release, err error) (*view.Release, error) { return View(rel), err }

// helmRelease is the Helm release v was made of (nil: none, or a view not made by View).
func helmRelease(v *view.Release) *release.Release {
	if v == nil {
		return nil
	}
	rel, _ := v.Source.(*release.Release)
	return rel
}

// ChartOf is the chart revision v was made from, whole (nil: none recorded): what an action
// takes to make a revision of the same chart (a rollout's pinned chart).
func ChartOf(v *view.Release) *chart.Chart {
	if rel := helmRelease(v); rel != nil {
		return rel.Chart
	}
	return nil
}

// CRDFiles are the files of ch's crds/ and its subcharts' (nil for nil), as guard reads them.
func CRDFiles(ch *chart.Chart) []guard.CRDFile {
	if ch == nil {
		return nil
	}
	crds := ch.CRDObjects()
	out := make([]guard.CRDFile, 0, len(crds))
	for _, crd := range crds {
		out = append(out, guard.CRDFile{Name: crd.Filename, Data: crd.File.Data})
	}
	return out
}

// sortRendered sorts a render's files as Helm's action will: the manifests, in install order,
// and the hooks (ok false: Helm cannot sort them, and its action says why).
func sortRendered(files map[string]string, caps *common.Capabilities) (manifests []releaseutil.Manifest, hooks []*release.Hook, ok bool) {
	in := make(map[string]string, len(files))
	for k, v := range files {
		if !strings.HasSuffix(k, "NOTES.txt") {
			in[k] = v
		}
	}
	hooks, manifests, err := releaseutil.SortManifests(in, caps.APIVersions, releaseutil.InstallOrder)
	if err != nil {
		return nil, nil, false
	}
	return manifests, hooks, true
}
