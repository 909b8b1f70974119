package guard

import (
	"strings"

	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/releaseutil"
	"k8s.io/apimachinery/pkg/api/meta"
)

// CheckRendered checks what a render made before anything of it is applied, and before Helm's
// action sees it (which creates the CRDs of templates/ while it builds the manifest, before
// it stores the revision): the hooks against the confinement and the rules, and the manifest
// and hooks together against the rules that read a release's objects together
// (objectrules.go: identities, grants, pod privileges, references), with refs resolving the
// references the release does not resolve itself (nil: none is). The manifest's objects are
// checked against the confinement by the post-renderer, which marks them. What Helm cannot
// sort is left to Helm's action, which says why in its words.
func (c Confinement) CheckRendered(mapper meta.RESTMapper, ch *chart.Chart, files map[string]string, caps *chartutil.Capabilities, refs ReferenceReader) error {
	manifests := make(map[string]string, len(files))
	for k, v := range files {
		if !strings.HasSuffix(k, "NOTES.txt") {
			manifests[k] = v
		}
	}
	hooks, sorted, err := releaseutil.SortManifests(manifests, caps.APIVersions, releaseutil.InstallOrder)
	if err != nil {
		return nil
	}
	streams := make([]identityStream, 0, len(sorted)+len(hooks))
	for _, m := range sorted {
		streams = append(streams, identityStream{src: SourceManifest, text: m.Content})
	}
	for _, h := range hooks {
		streams = append(streams, identityStream{src: SourceHook, hook: hookEvents(h), text: h.Manifest})
	}
	// Decoded once: the manifest's CRDs tell the scope of the kinds the hooks may use, and
	// every object goes to the identity rules.
	objs, err := parseStreams(streams)
	if err != nil {
		return err
	}
	s := NewScoper(mapper, ch)
	var vs []Violation
	for _, o := range objs {
		if o.src == SourceManifest {
			s.Learn(o.obj.Object)
			// The post-renderer checks them again as it marks them: here, so that a refusal
			// names every rule the release breaks at once.
			vs = append(vs, c.rules(SourceManifest, o.obj)...)
		}
	}
	hvs, err := c.checkHooks(s, hooks)
	if err != nil {
		return err
	}
	vs = append(vs, hvs...)
	ovs, err := c.violations(objs, objectRules{refs: refs})
	if err != nil {
		return err
	}
	if vs = append(vs, ovs...); len(vs) > 0 {
		return &ConfinementError{Violations: vs}
	}
	return nil
}
