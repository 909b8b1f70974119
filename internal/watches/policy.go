package watches

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/rudder-operator/rudder/internal/guard"
	"github.com/rudder-operator/rudder/internal/helm"
	"github.com/rudder-operator/rudder/internal/postrender"
)

// The day-2 policies of a watch: what becomes of a chart's crds/ on install and upgrade, which
// drift is restored, whether objects an upgrade cannot update are replaced, and how often a
// failed release is retried. Flux's helm-controller has each, and they keep its names.

// CRDs is a watch's crds field: the policy for the chart's crds/ directory, which Helm
// installs with the first revision and never upgrades, in Flux's words (helm.CRDsSkip,
// CRDsCreate, CRDsCreateReplace). Either policy applies only where allowClusterScoped names
// CustomResourceDefinition.
type CRDs struct {
	// Install is Create (default, Helm's) or Skip.
	Install helm.CRDMode `json:"install,omitempty"`
	// Upgrade is Skip (default, Helm's), Create or CreateReplace.
	Upgrade helm.CRDMode `json:"upgrade,omitempty"`
}

// What driftDetection.mode may say.
const (
	// DriftEnabled restores drift (the default): fields the release set that someone changed,
	// and objects someone deleted.
	DriftEnabled = "enabled"
	// DriftWarn reports drift in the Drifted condition and an Event, and restores nothing.
	DriftWarn = "warn"
	// DriftDisabled neither restores nor reports drift; readiness is still watched.
	DriftDisabled = "disabled"
)

// DriftDetection is a watch's driftDetection field.
type DriftDetection struct {
	// Mode is enabled (default), warn or disabled.
	Mode string `json:"mode,omitempty"`
	// Ignore lists fields that are neither restored nor reported, on the objects they target.
	Ignore []DriftIgnore `json:"ignore,omitempty"`
}

// DriftIgnore is one rule of driftDetection.ignore.
type DriftIgnore struct {
	// Paths are JSON pointers (RFC 6901) into the objects, such as /spec/replicas.
	Paths []string `json:"paths"`
	// Target selects the objects the rule applies to (unset: every object of the release).
	Target *DriftTarget `json:"target,omitempty"`
}

// DriftTarget selects objects of a release with the selector a post-renderer's patch targets
// with (Flux uses one selector type for both): every field that is set must match; name and
// namespace are regular expressions of the whole value.
type DriftTarget struct {
	postrender.Selector

	// Set by Load.
	name, namespace     *regexp.Regexp
	labels, annotations labels.Selector
}

// Install is a watch's install field.
type Install struct {
	// ServerSideApply: new releases are applied server-side, as rudder's field manager
	// (default false: client-side, as Helm 3 applied).
	ServerSideApply bool `json:"serverSideApply,omitempty"`
}

// Wait is a watch's wait field: what an install, upgrade or rollback waits for besides its
// hooks (helm.WaitPolicy).
type Wait struct {
	// Enable: the action waits until the release's objects are ready (kstatus), failing at
	// limits.actionTimeout.
	Enable bool `json:"enable,omitempty"`
	// Jobs: it waits for the release's Jobs to complete, too.
	Jobs bool `json:"jobs,omitempty"`
	// Kinds, when set, are the only kinds it waits for: Kind, or Kind.group.
	Kinds []string `json:"kinds,omitempty"`
}

// Upgrade is a watch's upgrade field.
type Upgrade struct {
	// Force replaces (deletes and creates) the objects whose update the API server refuses
	// because it changes an immutable field, within the one upgrade: one new revision.
	Force bool `json:"force,omitempty"`
	// ServerSideApply is auto (default: the method each release recorded), true (client-side
	// releases move to server-side apply on their next upgrade) or false.
	ServerSideApply ApplyMode `json:"serverSideApply,omitempty"`
	// ForceConflicts: a server-side apply (an upgrade, a rollback) takes the fields another
	// manager holds; else it fails with the conflict.
	ForceConflicts bool `json:"forceConflicts,omitempty"`
}

// ApplyMode is upgrade.serverSideApply: auto, true or false, as a string or a YAML boolean.
type ApplyMode string

// UnmarshalJSON takes a string or a boolean.
func (m *ApplyMode) UnmarshalJSON(b []byte) error {
	var on bool
	if err := json.Unmarshal(b, &on); err == nil {
		*m = ApplyMode(strconv.FormatBool(on))
		return nil
	}
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("upgrade.serverSideApply: %s must be auto, true or false", b)
	}
	*m = ApplyMode(s)
	return nil
}

// Remediation is a watch's remediation field.
type Remediation struct {
	// Retries is how often a failed install or upgrade of the same (chart, values) is tried
	// again, with exponential back-off, before it is held back and Stalled (default 0).
	Retries int `json:"retries,omitempty"`
}

// MaxRetries bounds remediation.retries: each retry is an install or upgrade, with its own
// revision, and the back-off doubles between them.
const MaxRetries = 10

func (w *Watch) checkPolicies() error {
	for _, check := range []func() error{w.checkCRDs, w.checkDrift, w.checkApply, w.checkWait, w.checkRemediation, w.checkRollout} {
		if err := check(); err != nil {
			return err
		}
	}
	return nil
}

func (w *Watch) checkCRDs() error {
	c := w.CRDs
	if c == nil {
		return nil
	}
	switch c.Install {
	case "", helm.CRDsCreate, helm.CRDsSkip:
	default:
		return fmt.Errorf("crds.install: %q must be %s or %s", c.Install, helm.CRDsCreate, helm.CRDsSkip)
	}
	switch c.Upgrade {
	case "", helm.CRDsSkip:
	case helm.CRDsCreate, helm.CRDsCreateReplace:
		if !w.AllowsCRDs() {
			return fmt.Errorf("crds.upgrade: %s needs allowClusterScoped to name CustomResourceDefinition: crds/ are applied only where the watch allows them", c.Upgrade)
		}
	default:
		return fmt.Errorf("crds.upgrade: %q must be %s, %s or %s", c.Upgrade, helm.CRDsSkip, helm.CRDsCreate, helm.CRDsCreateReplace)
	}
	return nil
}

// AllowsCRDs reports whether allowClusterScoped names CustomResourceDefinition.
func (w *Watch) AllowsCRDs() bool {
	gk := guard.CRDKind.GroupKind()
	return slices.Contains(w.AllowClusterScoped, gk.Kind) || slices.Contains(w.AllowClusterScoped, gk.Kind+"."+gk.Group)
}

// CRDPolicy is what an install and an upgrade do with the chart's crds/.
func (w *Watch) CRDPolicy() helm.CRDPolicy {
	var c CRDs
	if w.CRDs != nil {
		c = *w.CRDs
	}
	return helm.CRDPolicy{Install: cmp.Or(c.Install, helm.CRDsCreate), Upgrade: cmp.Or(c.Upgrade, helm.CRDsSkip)}
}

func (w *Watch) checkDrift() error {
	d := w.DriftDetection
	if d == nil {
		return nil
	}
	switch d.Mode {
	case "", DriftEnabled, DriftWarn, DriftDisabled:
	default:
		return fmt.Errorf("driftDetection.mode: %q must be %s, %s or %s", d.Mode, DriftEnabled, DriftWarn, DriftDisabled)
	}
	for i := range d.Ignore {
		if err := d.Ignore[i].complete(); err != nil {
			return fmt.Errorf("driftDetection.ignore[%d].%w", i, err)
		}
	}
	return nil
}

func (r *DriftIgnore) complete() error {
	if len(r.Paths) == 0 {
		return errors.New("paths: at least one JSON pointer such as /spec/replicas")
	}
	for j, p := range r.Paths {
		if err := helm.CheckPointer(p); err != nil {
			return fmt.Errorf("paths[%d]: %w", j, err)
		}
	}
	t := r.Target
	if t == nil {
		return nil
	}
	var err error
	if t.name, err = wholeRegexp(t.Name); err != nil {
		return fmt.Errorf("target.name: %w", err)
	}
	if t.namespace, err = wholeRegexp(t.Namespace); err != nil {
		return fmt.Errorf("target.namespace: %w", err)
	}
	if t.labels, err = labels.Parse(t.LabelSelector); err != nil {
		return fmt.Errorf("target.labelSelector: %w", err)
	}
	if t.annotations, err = labels.Parse(t.AnnotationSelector); err != nil {
		return fmt.Errorf("target.annotationSelector: %w", err)
	}
	return nil
}

// wholeRegexp compiles expr to match a whole value (nil: expr is empty, anything matches).
func wholeRegexp(expr string) (*regexp.Regexp, error) {
	if expr == "" {
		return nil, nil
	}
	return regexp.Compile("^(?:" + expr + ")$")
}

// matches reports whether the target selects obj (a nil target selects everything).
func (t *DriftTarget) matches(obj *unstructured.Unstructured) bool {
	if t == nil {
		return true
	}
	gvk := obj.GroupVersionKind()
	switch {
	case t.Group != "" && t.Group != gvk.Group, t.Version != "" && t.Version != gvk.Version, t.Kind != "" && t.Kind != gvk.Kind:
		return false
	case t.name != nil && !t.name.MatchString(obj.GetName()), t.namespace != nil && !t.namespace.MatchString(obj.GetNamespace()):
		return false
	case t.labels != nil && !t.labels.Matches(labels.Set(obj.GetLabels())):
		return false
	}
	return t.annotations == nil || t.annotations.Matches(labels.Set(obj.GetAnnotations()))
}

// DriftMode is driftDetection.mode, or its default.
func (w *Watch) DriftMode() string {
	if w.DriftDetection == nil || w.DriftDetection.Mode == "" {
		return DriftEnabled
	}
	return w.DriftDetection.Mode
}

// DriftIgnored are the JSON pointers of obj that drift detection neither restores nor
// reports (nil: none).
func (w *Watch) DriftIgnored(obj *unstructured.Unstructured) []string {
	if w.DriftDetection == nil {
		return nil
	}
	var out []string
	for _, r := range w.DriftDetection.Ignore {
		if r.Target.matches(obj) {
			out = append(out, r.Paths...)
		}
	}
	return out
}

// Forces reports whether an upgrade replaces the objects it cannot update.
func (w *Watch) Forces() bool { return w.Upgrade != nil && w.Upgrade.Force }

func (w *Watch) checkApply() error {
	if w.Upgrade == nil {
		return nil
	}
	if err := helm.CheckUpgrade(string(w.Upgrade.ServerSideApply)); err != nil {
		return fmt.Errorf("upgrade.serverSideApply: %w", err)
	}
	return nil
}

func (w *Watch) checkWait() error {
	if err := helm.CheckWait(w.WaitPolicy()); err != nil {
		return fmt.Errorf("wait.%w", err)
	}
	return nil
}

// WaitPolicy is what the watch's actions wait for besides their hooks.
func (w *Watch) WaitPolicy() helm.WaitPolicy {
	if w.Wait == nil {
		return helm.WaitPolicy{}
	}
	return helm.WaitPolicy{Enable: w.Wait.Enable, Jobs: w.Wait.Jobs, Kinds: w.Wait.Kinds}
}

// ApplyPolicy is how the watch's releases are applied: install.serverSideApply,
// upgrade.serverSideApply and upgrade.forceConflicts.
func (w *Watch) ApplyPolicy() helm.ApplyPolicy {
	var p helm.ApplyPolicy
	if w.Install != nil {
		p.Install = w.Install.ServerSideApply
	}
	if w.Upgrade != nil {
		p.Upgrade, p.ForceConflicts = string(w.Upgrade.ServerSideApply), w.Upgrade.ForceConflicts
	}
	return p
}

func (w *Watch) checkRemediation() error {
	if r := w.Remediation; r != nil && (r.Retries < 0 || r.Retries > MaxRetries) {
		return fmt.Errorf("remediation.retries: %d must be between 0 and %d", r.Retries, MaxRetries)
	}
	return nil
}

// Retries is remediation.retries (0: a failure is held back at once).
func (w *Watch) Retries() int {
	if w.Remediation == nil {
		return 0
	}
	return w.Remediation.Retries
}
