package render

import (
	"fmt"
	"path"
	"strings"

	yamlv3 "go.yaml.in/yaml/v3"
	releaseutil "helm.sh/helm/v4/pkg/release/v1/util"
	"sigs.k8s.io/yaml"
)

// What a render returns is bounded where the render's own bounds hold, in the worker, so that
// nothing of it costs rudder's process more than the bound decided before the render:
//
//   - The text: its size is held to Job.MaxBytes.
//   - The YAML it parses to: Helm's action sorts the manifest with sigs.k8s.io/yaml, which
//     expands YAML aliases into JSON — a 4 MB scalar anchored once and aliased 2,000 times is
//     8 GB. The worker parses every document that can hold an alias as Helm will, and holds
//     the sum of what the documents parse to to Job.MaxBytes too. A document with no '*' holds
//     no alias, for any YAML parser, and parses to about its own size.
//   - Its error: a template's failure (`fail (repeat …)`) is cut to maxErrorBytes.
//   - The frame that carries all of it: at most Job.MaxFrame, which the parent reads no more of.

// maxErrorBytes bounds the text of a render's error: enough for Helm's file, line and the
// start and end of its message.
const maxErrorBytes = 4 << 10

// cutError is msg cut to maxErrorBytes: its start (where Helm names the template) and its end.
func cutError(msg string) string {
	if len(msg) <= maxErrorBytes {
		return msg
	}
	const lastBytes = 1 << 10
	first, last := strings.ToValidUTF8(msg[:maxErrorBytes-lastBytes], ""), strings.ToValidUTF8(msg[len(msg)-lastBytes:], "")
	return fmt.Sprintf("%s … (%d bytes cut) … %s", first, len(msg)-len(first)-len(last), last)
}

// parsedSize is how many bytes Helm's parse of files makes of them (the JSON of each document,
// where it can differ from the text), stopping once it passes max. A document Helm could not
// parse is an error worded as Helm words it.
func parsedSize(files map[string]string, max int64) (int64, error) {
	total := int64(0)
	for name, text := range files {
		if !parsed(name) {
			continue
		}
		if !strings.Contains(text, "*") {
			total += int64(len(text))
		} else {
			for _, doc := range releaseutil.SplitManifests(text) {
				if !strings.Contains(doc, "*") {
					total += int64(len(doc))
					continue
				}
				// What the aliases expand to, counted on the node tree before anything is
				// expanded; then the expansion itself, as Helm makes it, measured.
				if n := expandedSize(doc, max-total); total+n > max {
					return total + n, nil
				}
				j, err := yaml.YAMLToJSON([]byte(doc))
				if err != nil {
					return 0, fmt.Errorf("YAML parse error on %s: %w", name, err)
				}
				total += int64(len(j))
				if total > max {
					return total, nil
				}
			}
		}
		if total > max {
			return total, nil
		}
	}
	return total, nil
}

// expandedSize is about how many bytes the document doc holds once its aliases are expanded
// (its scalars, and every node as a byte), as far as it parses; it stops counting past max.
func expandedSize(doc string, max int64) int64 {
	var root yamlv3.Node
	if yamlv3.Unmarshal([]byte(doc), &root) != nil {
		return 0 // the expansion reports it, as Helm would
	}
	memo := map[*yamlv3.Node]int64{}
	var size func(*yamlv3.Node, int) int64
	size = func(n *yamlv3.Node, depth int) int64 {
		if n == nil || depth > 10000 {
			return 0
		}
		if s, ok := memo[n]; ok {
			return s
		}
		memo[n] = 0 // an alias of an enclosing node (a cycle) counts once
		s := int64(len(n.Value)) + 1
		if n.Kind == yamlv3.AliasNode {
			s = size(n.Alias, depth+1)
		}
		for _, c := range n.Content {
			if s += size(c, depth+1); s > max {
				break
			}
		}
		memo[n] = s
		return s
	}
	return size(&root, 0)
}

// parsed reports whether Helm's action parses a rendered file as manifests: everything but
// partials and NOTES.txt.
func parsed(name string) bool {
	base := path.Base(name)
	return !strings.HasPrefix(base, "_") && !strings.HasSuffix(name, "NOTES.txt")
}
