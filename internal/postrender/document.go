package postrender

import kyaml "sigs.k8s.io/kustomize/kyaml/yaml"

// hookAnnotation is Helm's: an object that carries it is a hook (tests included).
const hookAnnotation = "helm.sh/hook"

// doc is one YAML document of a render's output, in its file.
type doc struct {
	file string
	// text is the document as rendered; node its parse, nil for one that holds no object
	// (comments only, or a scalar: Helm's business, left untouched).
	text string
	node *kyaml.RNode
	// changed: node, not text, is the document now.
	changed bool
}

func (d *doc) hook() bool { return d.node != nil && d.node.GetAnnotations()[hookAnnotation] != "" }
