package postrender

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/yaml"
)

// Spec is everything a watch layers on its chart's output: its post-renderers, in order, then
// its common metadata. The zero Spec changes nothing.
type Spec struct {
	PostRenderers  []PostRenderer `json:"postRenderers,omitempty"`
	CommonMetadata *Metadata      `json:"commonMetadata,omitempty"`
}

// PostRenderer is one entry of a watch's postRenderers (Flux's shape).
type PostRenderer struct {
	Kustomize *Kustomize `json:"kustomize,omitempty"`
	// Hooks: the post-renderer applies to the chart's hooks (tests included) too, not only to
	// its manifest. Default true: what a platform adds to a chart it does not own (a
	// toleration, a pull secret, a registry mirror) is needed by a hook's Job as much as by a
	// Deployment, or the hook does not schedule or pull. Helm 4 applies post-renderers to
	// hooks; Helm 3 did not, and Flux followed each in turn.
	Hooks *bool `json:"hooks,omitempty"`
}

// AppliesToHooks reports whether the post-renderer patches hooks too.
func (p PostRenderer) AppliesToHooks() bool { return p.Hooks == nil || *p.Hooks }

// Kustomize is a kustomize post-renderer: patches and image overrides.
type Kustomize struct {
	// Patches are strategic merge or JSON 6902 patches (kustomize tells which from the text),
	// each applied to the objects its target selects (a strategic merge patch without a
	// target, to the object it names).
	Patches []Patch `json:"patches,omitempty"`
	// Images override container images by name, as kustomize's images field does.
	Images []Image `json:"images,omitempty"`
}

// Patch is one kustomize patch.
type Patch struct {
	Patch  string    `json:"patch"`
	Target *Selector `json:"target,omitempty"`
}

// Selector is kustomize's (and Flux's) selector of objects: a patch's target, and, embedded in
// watches.DriftTarget, a drift-detection ignore rule's; every field set must match.
type Selector struct {
	Group              string `json:"group,omitempty"`
	Version            string `json:"version,omitempty"`
	Kind               string `json:"kind,omitempty"`
	Name               string `json:"name,omitempty"`
	Namespace          string `json:"namespace,omitempty"`
	LabelSelector      string `json:"labelSelector,omitempty"`
	AnnotationSelector string `json:"annotationSelector,omitempty"`
}

// String names the target in messages, as kubectl names objects: Kind.group/name in ns.
func (s *Selector) String() string {
	if s == nil {
		return "the object the patch names"
	}
	var b strings.Builder
	b.WriteString(cmp.Or(s.Kind, "*"))
	if s.Group != "" {
		b.WriteString("." + s.Group)
	}
	b.WriteString("/" + cmp.Or(s.Name, "*"))
	if s.Namespace != "" {
		b.WriteString(" in " + s.Namespace)
	}
	if s.LabelSelector != "" {
		b.WriteString(" labels " + s.LabelSelector)
	}
	if s.AnnotationSelector != "" {
		b.WriteString(" annotations " + s.AnnotationSelector)
	}
	return b.String()
}

// Image overrides one container image by name.
type Image struct {
	// Name is the image's name without tag or digest, as the chart renders it.
	Name    string `json:"name"`
	NewName string `json:"newName,omitempty"`
	NewTag  string `json:"newTag,omitempty"`
	Digest  string `json:"digest,omitempty"`
}

// Metadata is the labels and annotations every object of a release carries, hooks included.
// They win over the chart's own; they never name rudder's or Helm's own marks (Check).
type Metadata struct {
	Labels      map[string]string `json:"labels,omitempty"`
	Annotations map[string]string `json:"annotations,omitempty"`
}

// Empty reports whether s changes nothing.
func (s *Spec) Empty() bool {
	return s == nil || (len(s.PostRenderers) == 0 && (s.CommonMetadata == nil ||
		len(s.CommonMetadata.Labels)+len(s.CommonMetadata.Annotations) == 0))
}

// Digest is a content hash of s, "" for an empty one: a release made with another s is out of
// date, as one made from another chart is.
func (s *Spec) Digest() string {
	if s.Empty() {
		return ""
	}
	b, _ := json.Marshal(s) // maps are written sorted
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// reservedPrefixes are the keys of rudder's and Helm's own marks, which common metadata may
// not set: an owner annotation, a managed label or a hook annotation on every object would
// change what rudder and Helm take an object for.
var reservedPrefixes = []string{"rudder.dev/", "helm.sh/", "meta.helm.sh/", "app.kubernetes.io/managed-by"}

// Check validates s as a watch's fields, naming the field that is wrong.
func (s *Spec) Check() error {
	if s == nil {
		return nil
	}
	var errs []error
	for i, p := range s.PostRenderers {
		errs = append(errs, p.check(fmt.Sprintf("postRenderers[%d]", i)))
	}
	if m := s.CommonMetadata; m != nil {
		for k, v := range m.Labels {
			errs = append(errs, checkKey("commonMetadata.labels", k), fieldErrs("commonMetadata.labels["+k+"]", validation.IsValidLabelValue(v)))
		}
		for k := range m.Annotations {
			errs = append(errs, checkKey("commonMetadata.annotations", k))
		}
	}
	return errors.Join(errs...)
}

func checkKey(field, k string) error {
	for _, p := range reservedPrefixes {
		if strings.HasPrefix(k, p) {
			return fmt.Errorf("%s: %q is one of rudder's or Helm's own marks (%s…), which a watch may not set", field, k, p)
		}
	}
	return fieldErrs(field+"["+k+"]", validation.IsQualifiedName(k))
}

func fieldErrs(field string, msgs []string) error {
	if len(msgs) == 0 {
		return nil
	}
	return fmt.Errorf("%s: %s", field, strings.Join(msgs, "; "))
}

func (p PostRenderer) check(field string) error {
	if p.Kustomize == nil {
		return fmt.Errorf("%s: kustomize is required (the one kind of post-renderer)", field)
	}
	var errs []error
	for j, pt := range p.Kustomize.Patches {
		f := fmt.Sprintf("%s.kustomize.patches[%d]", field, j)
		var v any
		switch err := yaml.Unmarshal([]byte(pt.Patch), &v); {
		case strings.TrimSpace(pt.Patch) == "":
			errs = append(errs, fmt.Errorf("%s.patch: is required", f))
		case err != nil:
			errs = append(errs, fmt.Errorf("%s.patch: not YAML: %w", f, err))
		}
		if t := pt.Target; t != nil {
			if _, err := labels.Parse(t.LabelSelector); err != nil {
				errs = append(errs, fmt.Errorf("%s.target.labelSelector: %w", f, err))
			}
			if _, err := labels.Parse(t.AnnotationSelector); err != nil {
				errs = append(errs, fmt.Errorf("%s.target.annotationSelector: %w", f, err))
			}
		}
	}
	for j, im := range p.Kustomize.Images {
		if im.Name == "" {
			errs = append(errs, fmt.Errorf("%s.kustomize.images[%d].name: is required", field, j))
		}
	}
	return errors.Join(errs...)
}
