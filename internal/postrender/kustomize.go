package postrender

import (
	"fmt"
	"strconv"

	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/api/resmap"
	"sigs.k8s.io/kustomize/api/types"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/kustomize/kyaml/resid"
	kyaml "sigs.k8s.io/kustomize/kyaml/yaml"
	"sigs.k8s.io/yaml"
)

// originKey is the annotation by which a document is known again after kustomize: its index
// among the documents given. It is gone from what apply returns.
const originKey = "postrender.rudder.dev/origin"

// apply runs the post-renderer on the documents it applies to (the objects; the hooks' too
// when it says so), and puts what kustomize made of each where the document was. An object a
// patch deletes is gone; one kustomize no longer knows the origin of (a patch removed every
// annotation) stays in the file of the last document it was given.
func (p PostRenderer) apply(field string, docs []*doc) ([]*doc, error) {
	given := map[int]bool{}
	var in []*doc
	for i, d := range docs {
		if d.node != nil && (p.AppliesToHooks() || !d.hook()) {
			given[i] = true
			in = append(in, d)
		}
	}
	if len(in) == 0 {
		return docs, nil
	}
	out, err := p.Kustomize.run(in, p.Kustomize.Patches, p.Kustomize.Images)
	if err != nil {
		return nil, p.Kustomize.explain(field, in, err)
	}
	made := map[int][]*kyaml.RNode{}
	for _, r := range out.Resources() {
		n := r.Copy()
		id, err := strconv.Atoi(n.GetAnnotations()[originKey])
		if err != nil || id < 0 || id >= len(in) {
			id = len(in) - 1
		}
		if err := n.PipeE(kyaml.ClearAnnotation(originKey)); err != nil {
			return nil, err
		}
		if err := kyaml.ClearEmptyAnnotations(n); err != nil {
			return nil, err
		}
		made[id] = append(made[id], n)
	}
	res := make([]*doc, 0, len(docs))
	k := 0
	for i, d := range docs {
		if !given[i] {
			res = append(res, d)
			continue
		}
		for _, n := range made[k] {
			res = append(res, &doc{file: d.file, node: n, changed: true})
		}
		k++
	}
	return res, nil
}

// run is one kustomize build, in memory, of docs with patches and images.
func (k *Kustomize) run(docs []*doc, patches []Patch, images []Image) (resmap.ResMap, error) {
	fs := filesys.MakeFsInMemory()
	var resources []byte
	for i, d := range docs {
		n := d.node.Copy()
		if err := n.PipeE(kyaml.SetAnnotation(originKey, strconv.Itoa(i))); err != nil {
			return nil, err
		}
		s, err := n.String()
		if err != nil {
			return nil, err
		}
		resources = append(resources, "---\n"+s...)
	}
	kust := types.Kustomization{
		TypeMeta:  types.TypeMeta{APIVersion: types.KustomizationVersion, Kind: types.KustomizationKind},
		Resources: []string{"resources.yaml"},
	}
	for _, p := range patches {
		kust.Patches = append(kust.Patches, types.Patch{Patch: p.Patch, Target: p.Target.kustomize()})
	}
	for _, im := range images {
		kust.Images = append(kust.Images, types.Image{Name: im.Name, NewName: im.NewName, NewTag: im.NewTag, Digest: im.Digest})
	}
	b, err := yaml.Marshal(kust)
	if err != nil {
		return nil, err
	}
	if err := fs.WriteFile("resources.yaml", resources); err != nil {
		return nil, err
	}
	if err := fs.WriteFile("kustomization.yaml", b); err != nil {
		return nil, err
	}
	return krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(fs, ".")
}

func (s *Selector) kustomize() *types.Selector {
	if s == nil {
		return nil
	}
	return &types.Selector{
		ResId:              resid.ResId{Gvk: resid.Gvk{Group: s.Group, Version: s.Version, Kind: s.Kind}, Name: s.Name, Namespace: s.Namespace},
		LabelSelector:      s.LabelSelector,
		AnnotationSelector: s.AnnotationSelector,
	}
}

// explain names what of a post-renderer failed: the first patch that fails on its own, with
// its target, else the images, else the post-renderer as a whole (patches that fail only
// together).
func (k *Kustomize) explain(field string, docs []*doc, err error) error {
	for j, p := range k.Patches {
		if _, perr := k.run(docs, []Patch{p}, nil); perr != nil {
			return fmt.Errorf("%s.kustomize.patches[%d] (target %s): %w", field, j, p.Target, perr)
		}
	}
	if len(k.Images) > 0 {
		if _, ierr := k.run(docs, nil, k.Images); ierr != nil {
			return fmt.Errorf("%s.kustomize.images: %w", field, ierr)
		}
	}
	return fmt.Errorf("%s.kustomize: %w", field, err)
}
