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
)

// The day-2 policies of a watch: what becomes of a chart's crds/ on install and upgrade, which
// drift is restored, whether objects an upgrade cannot update are replaced, and how often a
// failed release is retried. Flux's helm-controller has each, and they keep its names.

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

// MaxRetries bounds remediation.retries: each retry is an install or upgrade, with its own
// revision, and the back-off doubles between them.
const MaxRetries = 10

func (ck checking) checkPolicies() error {
	for _, check := range []func() error{ck.checkCRDs, ck.checkDrift, ck.checkApply, ck.checkWait, ck.checkRemediation, ck.checkRollout} {
		if err := check(); err != nil {
			return err
		}
	}
	return nil
}

func (ck checking) checkCRDs() error {
	w := ck.w
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
		if !w.Policies().AllowsCRDs() {
			return fmt.Errorf("crds.upgrade: %s needs allowClusterScoped to name CustomResourceDefinition: crds/ are applied only where the watch "+
				"allows them", c.Upgrade)
		}
	default:
		return fmt.Errorf("crds.upgrade: %q must be %s, %s or %s", c.Upgrade, helm.CRDsSkip, helm.CRDsCreate, helm.CRDsCreateReplace)
	}
	return nil
}

// AllowsCRDs reports whether allowClusterScoped names CustomResourceDefinition.
func (p Policies) AllowsCRDs() bool {
	gk := guard.CRDKind.GroupKind()
	return slices.Contains(p.w.AllowClusterScoped, gk.Kind) || slices.Contains(p.w.AllowClusterScoped, gk.Kind+"."+gk.Group)
}

// CRDPolicy is what an install and an upgrade do with the chart's crds/.
func (p Policies) CRDPolicy() helm.CRDPolicy {
	var c CRDs
	if p.w.CRDs != nil {
		c = *p.w.CRDs
	}
	return helm.CRDPolicy{Install: cmp.Or(c.Install, helm.CRDsCreate), Upgrade: cmp.Or(c.Upgrade, helm.CRDsSkip)}
}

func (ck checking) checkDrift() error {
	w := ck.w
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
func (p Policies) DriftMode() string {
	if p.w.DriftDetection == nil || p.w.DriftDetection.Mode == "" {
		return DriftEnabled
	}
	return p.w.DriftDetection.Mode
}

// DriftIgnored are the JSON pointers of obj that drift detection neither restores nor
// reports (nil: none).
func (p Policies) DriftIgnored(obj *unstructured.Unstructured) []string {
	if p.w.DriftDetection == nil {
		return nil
	}
	var out []string
	for _, r := range p.w.DriftDetection.Ignore {
		if r.Target.matches(obj) {
			out = append(out, r.Paths...)
		}
	}
	return out
}

// Forces reports whether an upgrade replaces the objects it cannot update.
func (p Policies) Forces() bool { return p.w.Upgrade != nil && p.w.Upgrade.Force }

func (ck checking) checkApply() error {
	w := ck.w
	if w.Upgrade == nil {
		return nil
	}
	if err := helm.CheckUpgrade(string(w.Upgrade.ServerSideApply)); err != nil {
		return fmt.Errorf("upgrade.serverSideApply: %w", err)
	}
	return nil
}

func (ck checking) checkWait() error {
	w := ck.w
	if err := helm.CheckWait(w.Policies().WaitPolicy()); err != nil {
		return fmt.Errorf("wait.%w", err)
	}
	return nil
}

// WaitPolicy is what the watch's actions wait for besides their hooks.
func (p Policies) WaitPolicy() helm.WaitPolicy {
	if p.w.Wait == nil {
		return helm.WaitPolicy{}
	}
	return helm.WaitPolicy{Enable: p.w.Wait.Enable, Jobs: p.w.Wait.Jobs, Kinds: p.w.Wait.Kinds}
}

// ApplyPolicy is how the watch's releases are applied: install.serverSideApply,
// upgrade.serverSideApply and upgrade.forceConflicts.
func (p Policies) ApplyPolicy() helm.ApplyPolicy {
	var a helm.ApplyPolicy
	if p.w.Install != nil {
		a.Install, a.TakeOwnership = p.w.Install.ServerSideApply, p.w.Install.TakeOwnership
	}
	if p.w.Upgrade != nil {
		a.Upgrade, a.ForceConflicts = string(p.w.Upgrade.ServerSideApply), p.w.Upgrade.ForceConflicts
	}
	return a
}

func (ck checking) checkRemediation() error {
	w := ck.w
	if r := w.Remediation; r != nil && (r.Retries < 0 || r.Retries > MaxRetries) {
		return fmt.Errorf("remediation.retries: %d must be between 0 and %d", r.Retries, MaxRetries)
	}
	return nil
}

// Retries is remediation.retries (0: a failure is held back at once).
func (p Policies) Retries() int {
	if p.w.Remediation == nil {
		return 0
	}
	return p.w.Remediation.Retries
}
