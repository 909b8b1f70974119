package postrender

import (
	"fmt"
	"maps"
	"path"
	"slices"
	"sort"
	"strconv"
	"strings"

	kyaml "sigs.k8s.io/kustomize/kyaml/yaml"
)

// Apply applies s to a render's output, Helm's engine's files keyed by template path: each
// post-renderer in order (to the manifest's objects, and the hooks' when it says so), then
// the common metadata to every object. NOTES.txt is left as it is, and so is every file when
// s is empty. A file's documents keep their order and their file, so that `helm get manifest`
// names the template each object came from. splitManifests splits a file into its documents
// as Helm's engine does (the render passes Helm's releaseutil.SplitManifests, keys
// "manifest-<n>" in file order), so that what Helm then stores is what it would have split.
func (s *Spec) Apply(files map[string]string, splitManifests func(string) map[string]string) (map[string]string, error) {
	if s.Empty() {
		return files, nil
	}
	docs := split(files, splitManifests)
	var err error
	for i, p := range s.PostRenderers {
		if docs, err = p.apply(fmt.Sprintf("postRenderers[%d]", i), docs); err != nil {
			return nil, err
		}
	}
	if m := s.CommonMetadata; m != nil {
		for _, d := range docs {
			if err := m.apply(d); err != nil {
				return nil, err
			}
		}
	}
	return join(files, docs)
}

// split parses the documents of every file but the notes, files in name order.
func split(files map[string]string, splitManifests func(string) map[string]string) []*doc {
	names := slices.Sorted(maps.Keys(files))
	var docs []*doc
	for _, name := range names {
		if isNotes(name) {
			continue
		}
		parts := splitManifests(files[name])
		keys := slices.Collect(maps.Keys(parts))
		// SplitManifests keys them "manifest-<n>", in file order.
		sort.Slice(keys, func(i, j int) bool { return manifestIndex(keys[i]) < manifestIndex(keys[j]) })
		for _, k := range keys {
			d := &doc{file: name, text: parts[k]}
			// A document that does not parse is left as it is, for Helm to refuse in its
			// words, as is one with no object (comments only: io.EOF).
			if n, err := kyaml.Parse(d.text); err == nil && n.YNode().Kind == kyaml.MappingNode && n.GetKind() != "" {
				d.node = n
			}
			docs = append(docs, d)
		}
	}
	return docs
}

func manifestIndex(k string) int {
	n, _ := strconv.Atoi(strings.TrimPrefix(k, "manifest-"))
	return n
}

func isNotes(name string) bool { return path.Base(name) == "NOTES.txt" }

// join writes docs back into their files. A file whose documents are all gone (a patch
// deleted them) is left empty, which Helm skips.
func join(files map[string]string, docs []*doc) (map[string]string, error) {
	built := make(map[string]*strings.Builder, len(files))
	for _, d := range docs {
		text := d.text
		if d.changed {
			s, err := d.node.String()
			if err != nil {
				return nil, err
			}
			text = s
		}
		b := built[d.file]
		if b == nil {
			b = &strings.Builder{}
			built[d.file] = b
		} else {
			b.WriteString("---\n")
		}
		b.WriteString(strings.TrimSuffix(text, "\n"))
		b.WriteString("\n")
	}
	out := make(map[string]string, len(files))
	for name, text := range files {
		switch b := built[name]; {
		case isNotes(name):
			out[name] = text
		case b != nil:
			out[name] = b.String()
		default:
			out[name] = ""
		}
	}
	return out, nil
}

// apply sets the common metadata on one document's object, over the chart's own.
func (m *Metadata) apply(d *doc) error {
	if d.node == nil || len(m.Labels)+len(m.Annotations) == 0 {
		return nil
	}
	for field, kv := range map[string]map[string]string{kyaml.LabelsField: m.Labels, kyaml.AnnotationsField: m.Annotations} {
		for _, k := range slices.Sorted(maps.Keys(kv)) {
			if err := setMetadata(d.node, field, k, kv[k]); err != nil {
				return fmt.Errorf("commonMetadata.%s[%s]: %w", field, k, err)
			}
		}
	}
	d.changed = true
	return nil
}

// setMetadata sets metadata.<field>[key] to value, a string (quoted only where YAML would read
// it as something else, unlike kyaml's SetLabel, which quotes every label).
func setMetadata(n *kyaml.RNode, field, key, value string) error {
	return n.PipeE(kyaml.PathGetter{Path: []string{kyaml.MetadataField, field}, Create: kyaml.MappingNode},
		kyaml.FieldSetter{Name: key, Value: kyaml.NewStringRNode(value)})
}
