package watches

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"text/template"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/yaml"
)

// Loading a watches file: each entry parsed, completed (its kind, chart, selector, templates
// and layers) and checked section by section, where each section is checked.

var (
	dns1123  = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)
	kindName = regexp.MustCompile(`^[A-Z][A-Za-z0-9]*$`)
)

// Load reads and validates a watches file.
func Load(path string) ([]*Watch, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading watches file: %w", err)
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, err
	}
	ws, err := Parse(b, filepath.Dir(abs), os.LookupEnv)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	for i, w := range ws {
		fi, err := os.Stat(w.chartPath)
		if err != nil {
			return nil, fmt.Errorf("%s: entry %d (%s): chart: %w", path, i, w, err)
		}
		if !fi.IsDir() {
			return nil, fmt.Errorf("%s: entry %d (%s): chart: %s is not a directory", path, i, w, w.chartPath)
		}
	}
	return ws, nil
}

// Parse validates watches.yaml content. baseDir resolves relative chart paths; lookupEnv
// expands $ENV in overrideValues. It touches no files.
func Parse(data []byte, baseDir string, lookupEnv func(string) (string, bool)) ([]*Watch, error) {
	var ws []*Watch
	if err := yaml.UnmarshalStrict(data, &ws); err != nil {
		return nil, fmt.Errorf("parsing watches: %w", err)
	}
	if len(ws) == 0 {
		return nil, errors.New("no watches: the file lists no group/version/kind")
	}
	seen := map[schema.GroupVersionKind]int{}
	for i, w := range ws {
		if w == nil {
			return nil, fmt.Errorf("entry %d: empty entry", i)
		}
		if err := complete(w, baseDir, lookupEnv); err != nil {
			return nil, fmt.Errorf("entry %d (%s/%s %s): %w", i, w.Group, w.Version, w.Kind, err)
		}
		if j, dup := seen[w.gvk]; dup {
			return nil, fmt.Errorf("entry %d (%s): duplicate of entry %d: a kind can be watched once", i, w, j)
		}
		seen[w.gvk] = i
	}
	if err := resolveDependsOn(ws); err != nil {
		return nil, err
	}
	return ws, nil
}

// complete fills in what the entry derives (its kind, chart path, selector, templates and
// layers) and checks every section of it, naming the field in its error.
func complete(w *Watch, baseDir string, lookupEnv func(string) (string, bool)) error {
	fill, check := completing{w}, checking{w}
	for _, step := range []func() error{
		fill.completeGVK,
		func() error { return fill.completeChart(baseDir) },
		fill.completeSelector,
		check.checkLimits,
		check.checkTenancy,
		w.Limits.check,
		check.checkTest,
		check.checkValuesFrom,
		check.checkPolicies,
		fill.completeLayers,
		fill.compileHealth,
		func() error { return fill.completeTemplates(lookupEnv) },
	} {
		if err := step(); err != nil {
			return err
		}
	}
	return nil
}

func (c completing) completeGVK() error {
	w := c.w
	if w.Group != "" {
		if errs := validation.IsDNS1123Subdomain(w.Group); len(errs) > 0 {
			return fmt.Errorf("group: %s", strings.Join(errs, "; "))
		}
	}
	if !dns1123.MatchString(w.Version) || len(w.Version) > 63 {
		return fmt.Errorf("version: %q must be a DNS label such as v1alpha1", w.Version)
	}
	if !kindName.MatchString(w.Kind) {
		return fmt.Errorf("kind: %q must be a CamelCase name such as MyApp", w.Kind)
	}
	w.gvk = schema.GroupVersionKind{Group: w.Group, Version: w.Version, Kind: w.Kind}
	return nil
}

func (c completing) completeChart(baseDir string) error {
	w := c.w
	if w.Chart == "" {
		return errors.New("chart: required")
	}
	w.chartPath = w.Chart
	if !filepath.IsAbs(w.chartPath) {
		w.chartPath = filepath.Join(baseDir, w.chartPath)
	}
	w.chartPath = filepath.Clean(w.chartPath)
	return nil
}

func (c completing) completeSelector() error {
	w := c.w
	w.selector = labels.Everything()
	if w.Selector != nil {
		s, err := metav1.LabelSelectorAsSelector(w.Selector)
		if err != nil {
			return fmt.Errorf("selector: %w", err)
		}
		w.selector = s
	}
	return nil
}

func (ck checking) checkLimits() error {
	w := ck.w
	if w.ReconcilePeriod != nil && w.ReconcilePeriod.Duration < 0 {
		return fmt.Errorf("reconcilePeriod: %s must not be negative", w.ReconcilePeriod.Duration)
	}
	if w.ReconcilePeriod != nil && w.ReconcilePeriod.Duration > 0 && w.ReconcilePeriod.Duration < time.Second {
		return fmt.Errorf("reconcilePeriod: %s is below the 1s minimum", w.ReconcilePeriod.Duration)
	}
	if w.MaxConcurrentReconciles < 0 {
		return fmt.Errorf("maxConcurrentReconciles: %d must not be negative", w.MaxConcurrentReconciles)
	}
	if w.MaxHistory != nil && *w.MaxHistory < 0 {
		return fmt.Errorf("maxHistory: %d must not be negative (0 keeps every revision)", *w.MaxHistory)
	}
	return nil
}

func (ck checking) checkTenancy() error {
	w := ck.w
	for _, ns := range w.AllowedNamespaces {
		if errs := validation.IsDNS1123Label(ns); len(errs) > 0 && ns != "*" {
			return fmt.Errorf("allowedNamespaces: %q: %s", ns, strings.Join(errs, "; "))
		}
	}
	for _, k := range w.AllowClusterScoped {
		if k == "" {
			return errors.New("allowClusterScoped: empty kind")
		}
	}
	if w.ServiceAccountName != "" {
		if errs := validation.IsDNS1123Subdomain(w.ServiceAccountName); len(errs) > 0 {
			return fmt.Errorf("serviceAccountName: %q: %s", w.ServiceAccountName, strings.Join(errs, "; "))
		}
	}
	return ck.checkIdentities()
}

func (c completing) completeTemplates(lookupEnv func(string) (string, bool)) error {
	w := c.w
	w.overrideTmpls = map[string]*template.Template{}
	for key, raw := range w.OverrideValues {
		if key == "" || strings.HasPrefix(key, ".") || strings.HasSuffix(key, ".") || strings.Contains(key, "..") {
			return fmt.Errorf("overrideValues: key %q is not a dotted path such as image.tag", key)
		}
		expanded := os.Expand(raw, func(name string) string {
			v, _ := lookupEnv(name)
			return v
		})
		t, err := newTemplate("overrideValues."+key, expanded)
		if err != nil {
			return fmt.Errorf("overrideValues.%s: %w", key, err)
		}
		w.overrideTmpls[key] = t
	}
	if w.ReleaseName != "" {
		t, err := newTemplate("releaseName", w.ReleaseName)
		if err != nil {
			return fmt.Errorf("releaseName: %w", err)
		}
		w.releaseNameTpl = t
	}
	return nil
}
