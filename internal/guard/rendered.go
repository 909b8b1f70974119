package guard

import (
	"k8s.io/apimachinery/pkg/api/meta"

	"github.com/rudder-operator/rudder/internal/release"
)

// CheckRendered checks what a render made before anything of it is applied, and before Helm's
// action sees it (which creates the CRDs of templates/ while it builds the manifest, before
// it stores the revision): the hooks against the confinement and the rules, and the manifest
// and hooks together against the rules that read a release's objects together
// (objectrules.go: identities, grants, pod privileges, references), with refs resolving the
// references the release does not resolve itself (nil: none is). The manifest's objects are
// checked against the confinement by the post-renderer, which marks them. The Helm layer
// sorts the render's files into manifests and hooks (helm.sortRendered), as Helm's action will.
func (c Confinement) CheckRendered(mapper meta.RESTMapper, crds []CRDFile, manifests []string, hooks []*release.Hook,
	refs ReferenceReader) error {
	streams := make([]identityStream, 0, len(manifests)+len(hooks))
	for _, m := range manifests {
		streams = append(streams, identityStream{src: SourceManifest, text: m})
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
	s := NewScoper(mapper, crds)
	var vs []Violation
	for _, o := range objs {
		if o.src == SourceManifest {
			s.Learn(o.obj.Object)
			// The post-renderer checks them again as it marks them: here, so that a refusal
			// names every rule the release breaks at once.
			vs = append(vs, c.rules(SourceManifest, o.obj)...)
		}
	}
	hvs, err := scoped{c, s}.checkHooks(hooks)
	if err != nil {
		return err
	}
	vs = append(vs, hvs...)
	ovs, err := newReleaseSet(c, objs).violations(objectRules{refs: refs})
	if err != nil {
		return err
	}
	if vs = append(vs, ovs...); len(vs) > 0 {
		return &ConfinementError{Violations: vs}
	}
	return nil
}
