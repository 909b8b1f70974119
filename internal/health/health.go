package health

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/version"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
	"k8s.io/apiserver/pkg/cel/environment"
	"k8s.io/apiserver/pkg/cel/library"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"
)

// Check is one entry of a watch's healthChecks: the expressions that judge objects of one
// apiVersion and kind. Current is required; InProgress and Failed are optional. Each sees
// the object's metadata, spec and status as variables of those names.
type Check struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Current    string `json:"current"`
	InProgress string `json:"inProgress,omitempty"`
	Failed     string `json:"failed,omitempty"`
}

// evalTimeout bounds one evaluation in time, beside the cost bound (which bounds the work
// CEL counts; the timeout, what it cannot, such as a huge list walked by a macro).
var evalTimeout = time.Second

// Checker judges the objects of the kinds it has checks for. Its zero value, and nil, have
// none.
type Checker struct {
	kinds map[schema.GroupVersionKind]*compiled
}

type compiled struct {
	// in order of evaluation: inProgress, failed, current.
	exprs []expr
}

type expr struct {
	field, text string
	verdict     status.Status
	prg         cel.Program
}

// Compile compiles checks; field names them in errors ("healthChecks"). Two checks of one
// kind are an error, as is an expression that does not compile or is not a bool.
func Compile(field string, checks []Check) (*Checker, error) {
	if len(checks) == 0 {
		return nil, nil
	}
	env, err := newEnv()
	if err != nil {
		return nil, err
	}
	c := &Checker{kinds: map[schema.GroupVersionKind]*compiled{}}
	var errs []error
	for i, ch := range checks {
		f := fmt.Sprintf("%s[%d]", field, i)
		gv, err := schema.ParseGroupVersion(ch.APIVersion)
		switch {
		case err != nil || ch.APIVersion == "":
			errs = append(errs, fmt.Errorf("%s.apiVersion: %q is not group/version", f, ch.APIVersion))
			continue
		case ch.Kind == "":
			errs = append(errs, fmt.Errorf("%s.kind: is required", f))
			continue
		case ch.Current == "":
			errs = append(errs, fmt.Errorf("%s.current: is required", f))
			continue
		}
		gvk := gv.WithKind(ch.Kind)
		if _, dup := c.kinds[gvk]; dup {
			errs = append(errs, fmt.Errorf("%s: a second check of %s %s", f, ch.APIVersion, ch.Kind))
			continue
		}
		k := &compiled{}
		for _, e := range []expr{{field: "inProgress", text: ch.InProgress, verdict: status.InProgressStatus},
			{field: "failed", text: ch.Failed, verdict: status.FailedStatus}, {field: "current", text: ch.Current, verdict: status.CurrentStatus}} {
			if e.text == "" {
				continue
			}
			if e.prg, err = compile(env, e.text); err != nil {
				errs = append(errs, fmt.Errorf("%s.%s: %w", f, e.field, err))
				continue
			}
			k.exprs = append(k.exprs, e)
		}
		c.kinds[gvk] = k
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return c, nil
}

func newEnv() (*cel.Env, error) {
	set, err := environment.MustBaseEnvSet(environment.DefaultCompatibilityVersion()).Extend(environment.VersionedOptions{
		IntroducedVersion: version.MajorMinor(1, 0),
		EnvOptions: []cel.EnvOption{cel.Variable("metadata", cel.DynType), cel.Variable("spec", cel.DynType), cel.Variable("status",
			cel.DynType)},
	})
	if err != nil {
		return nil, err
	}
	return set.NewExpressionsEnv(), nil
}

// compile is one expression as a program bounded to the API server's cost per call.
func compile(env *cel.Env, text string) (cel.Program, error) {
	ast, iss := env.Compile(text)
	if iss.Err() != nil {
		// CEL's issues name the position: "ERROR: <input>:1:8: undeclared reference …".
		return nil, errors.New(strings.TrimSpace(iss.Err().Error()))
	}
	if t := ast.OutputType(); !t.IsExactType(types.BoolType) && !t.IsExactType(types.DynType) {
		return nil, fmt.Errorf("%q is a %s, not a bool", text, t)
	}
	return env.Program(ast, cel.CostLimit(celconfig.PerCallLimit), cel.CostTracking(&library.CostEstimator{}),
		cel.InterruptCheckFrequency(celconfig.CheckFrequency))
}

// Judges reports whether c has a check for objects of gvk.
func (c *Checker) Judges(gvk schema.GroupVersionKind) bool {
	if c == nil {
		return false
	}
	_, ok := c.kinds[gvk]
	return ok
}

// Kinds are the kinds c has checks for.
func (c *Checker) Kinds() []schema.GroupVersionKind {
	if c == nil {
		return nil
	}
	return slices.Collect(maps.Keys(c.kinds))
}

// Status is the verdict of c's check for obj's kind on obj, with Flux's semantics: an object
// whose status has not observed its generation yet, or that has no status, is InProgress;
// then the first of inProgress, failed and current that is true decides; none true is
// InProgress. An expression that cannot be evaluated on the object (a field it names is not
// there yet) leaves it InProgress, saying why. ok is false when c has no check for the kind.
func (c *Checker) Status(gvk schema.GroupVersionKind, obj map[string]any) (verdict status.Status, msg string, ok bool) {
	if !c.Judges(gvk) {
		return "", "", false
	}
	st, _ := obj["status"].(map[string]any)
	md, _ := obj["metadata"].(map[string]any)
	if len(st) == 0 {
		return status.InProgressStatus, "no status yet", true
	}
	if og, ok := number(st["observedGeneration"]); ok {
		if g, _ := number(md["generation"]); g != og {
			return status.InProgressStatus, fmt.Sprintf("status.observedGeneration %d is not the generation %d", og, g), true
		}
	}
	vars := map[string]any{"metadata": md, "spec": obj["spec"], "status": st}
	if vars["spec"] == nil {
		vars["spec"] = map[string]any{}
	}
	for _, e := range c.kinds[gvk].exprs {
		ctx, cancel := context.WithTimeout(context.Background(), evalTimeout)
		out, _, err := e.prg.ContextEval(ctx, vars)
		cancel()
		if err != nil {
			return status.InProgressStatus, fmt.Sprintf("healthChecks %s (%s) cannot be evaluated: %v", e.field, e.text, err), true
		}
		if b, isBool := out.Value().(bool); isBool && b {
			return e.verdict, fmt.Sprintf("healthChecks %s (%s) is true", e.field, e.text), true
		}
	}
	return status.InProgressStatus, "healthChecks current is not true yet", true
}

func number(v any) (int64, bool) {
	switch n := v.(type) {
	case int64:
		return n, true
	case float64:
		return int64(n), true
	case int:
		return int64(n), true
	}
	return 0, false
}
