package render

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chartutil"
)

func testChart(tmpl string) *Tree {
	return &Tree{Metadata: &chart.Metadata{APIVersion: "v2", Name: "t", Version: "0.1.0"},
		Templates: []*chart.File{{Name: "templates/t.yaml", Data: []byte(tmpl)}}}
}

func job(tmpl string, values map[string]any) *Job {
	return &Job{Chart: testChart(tmpl), Values: values, Caps: chartutil.DefaultCapabilities,
		Options: chartutil.ReleaseOptions{Name: "r", Namespace: "ns", Revision: 1, IsInstall: true}, MaxBytes: 64 << 20}
}

// TestRenderBounds: a render that recurses, loops or allocates without end is stopped at its
// bound and said to be, and the pool renders on.
func TestRenderBounds(t *testing.T) {
	pool, err := NewPool(Options{Workers: 2})
	if err != nil {
		t.Fatal(err)
	}
	// The time bound is 3 s where it is the bound under test; elsewhere a minute, so that a
	// loaded machine (CI, the integration suites on the same cores) cannot trip it before the
	// bound the case is about.
	const timeoutBound, otherwise = 3 * time.Second, time.Minute
	tests := []struct {
		name, tmpl string
		values     map[string]any
		bound      string
	}{
		// Each level of tpl copies the templates: memory or the stack, whichever comes first.
		{"tpl recursion", `{{ tpl .Values.x . }}`, map[string]any{"x": `{{ tpl .Values.x . }}`}, BoundStack + "|" + BoundMemory},
		{"include recursion", `{{ define "r" }}{{ include "r" . }}{{ end }}{{ include "r" . }}`, nil, ""},
		{"until", `{{ range until (int .Values.n) }}x{{ end }}`, map[string]any{"n": int64(300000000)}, BoundMemory},
		{"repeat", `{{ repeat (int .Values.n) "xxxxxxxx" }}`, map[string]any{"n": int64(200000000)}, BoundMemory},
		{"nested until", `{{ range until 20000 }}{{ range until 20000 }}{{ end }}{{ end }}`, nil, BoundTimeout},
		{"output", `{{ repeat 3000000 "xxxxxxxxxxxxxxxxxxxxxxxxx" }}`, nil, BoundOutput},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			limits := Limits{Timeout: otherwise, Memory: 256 << 20}
			if tt.bound == BoundTimeout {
				limits.Timeout = timeoutBound
			}
			_, err := pool.Render(context.Background(), job(tt.tmpl, tt.values), limits, nil)
			var ee *ExceededError
			switch {
			case tt.bound == "" && (err == nil || errors.As(err, &ee)):
				t.Fatalf("got %v, want the template's own error", err)
			case tt.bound != "" && (!errors.As(err, &ee) || !strings.Contains("|"+tt.bound+"|", "|"+ee.Bound+"|")):
				t.Fatalf("got %v, want the %s bound exceeded", err, tt.bound)
			}
			res, err := pool.Render(context.Background(), job(`n: {{ .Values.n }}`, map[string]any{"n": int64(7)}), limits, nil)
			if err != nil || res.Files["t/templates/t.yaml"] != "n: 7" {
				t.Fatalf("the pool does not render on: %v %v", res, err)
			}
		})
	}
}

// TestRenderKeepsNumbersAndErrors: values keep their numbers' types across the process
// boundary, and a template's failure comes back as Helm says it.
func TestRenderKeepsNumbersAndErrors(t *testing.T) {
	pool, err := NewPool(Options{Workers: 1})
	if err != nil {
		t.Fatal(err)
	}
	limits := Limits{Timeout: 10 * time.Second, Memory: 256 << 20}
	res, err := pool.Render(context.Background(), job(`{{ .Values.i }} {{ .Values.f }} {{ kindOf .Values.i }} {{ kindOf .Values.f }} {{ .Values.big }}`,
		map[string]any{"i": int64(1000000), "f": float64(3), "big": int64(1) << 60}), limits, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := res.Files["t/templates/t.yaml"], "1000000 3 int64 float64 1152921504606846976"; got != want {
		t.Fatalf("rendered %q, want %q", got, want)
	}
	_, err = pool.Render(context.Background(), job(`{{ required "x is required" .Values.x }}`, nil), limits, nil)
	if err == nil || !strings.Contains(err.Error(), "x is required") {
		t.Fatalf("got %v, want the template's error", err)
	}
}

// TestRenderShareIsPerNamespace: renders of one namespace that run to their timeout hold no
// more than its share of the workers; another namespace's render runs meanwhile.
func TestRenderShareIsPerNamespace(t *testing.T) {
	pool, err := NewPool(Options{Workers: 2})
	if err != nil {
		t.Fatal(err)
	}
	limits := Limits{Timeout: 4 * time.Second, Memory: 256 << 20}
	spin := func(ns string) *Job {
		j := job(`{{ range until 30000 }}{{ range until 30000 }}{{ end }}{{ end }}`, nil)
		j.Options.Namespace = ns
		return j
	}
	done := make(chan string, 3)
	for _, name := range []string{"a1", "a2"} {
		go func() {
			_, _ = pool.Render(context.Background(), spin("a"), limits, nil)
			done <- name
		}()
	}
	time.Sleep(200 * time.Millisecond) // both of namespace a's renders asked first
	quick := job(`ok`, nil)
	quick.Options.Namespace = "b"
	if _, err := pool.Render(context.Background(), quick, limits, nil); err != nil {
		t.Fatal(err)
	}
	select {
	case name := <-done:
		t.Fatalf("%s ended before namespace b's render: b waited for namespace a's renders", name)
	default:
	}
	<-done
	<-done
}
