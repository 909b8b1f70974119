package render

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"helm.sh/helm/v4/pkg/chart/common"
	chart "helm.sh/helm/v4/pkg/chart/v2"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/rudder-operator/rudder/internal/postrender"
)

func testChart(tmpl string) *Tree {
	return &Tree{Metadata: &chart.Metadata{APIVersion: "v2", Name: "t", Version: "0.1.0"},
		Templates: []*common.File{{Name: "templates/t.yaml", Data: []byte(tmpl)}}}
}

func job(tmpl string, values map[string]any) *Job {
	return &Job{Chart: testChart(tmpl), Values: values, Caps: common.DefaultCapabilities,
		ReleaseOptions: common.ReleaseOptions{Name: "r", Namespace: "ns", Revision: 1, IsInstall: true}, MaxBytes: 64 << 20}
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
		// 25 MB over a 16 MiB output bound, far below the memory bound: the case is the output's.
		{"output", `{{ repeat 1000000 "xxxxxxxxxxxxxxxxxxxxxxxxx" }}`, nil, BoundOutput},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			limits := Limits{Timeout: otherwise, Memory: 256 << 20}
			if tt.bound == BoundTimeout {
				limits.Timeout = timeoutBound
			}
			j := job(tt.tmpl, tt.values)
			if tt.bound == BoundOutput {
				j.MaxBytes = 16 << 20
			}
			_, err := pool.Render(context.Background(), j, limits, nil)
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
		j.ReleaseOptions.Namespace = ns
		return j
	}
	done := make(chan string, 3)
	for _, name := range []string{"a1", "a2"} {
		go func() {
			_, _ = pool.Render(context.Background(), spin("a"), limits, nil)
			done <- name
		}()
	}
	waitFor(t, "namespace a's renders: one under way, one waiting for its turn", func() bool {
		pool.mu.Lock()
		defer pool.mu.Unlock()
		return pool.rendering["a"] == 1 && pool.queued["a"] == 1
	})
	quick := job(`ok`, nil)
	quick.ReleaseOptions.Namespace = "b"
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

// TestRenderOutputIsBoundedInTheWorker: what a render returns costs rudder's process no more
// than its bound. YAML aliases that would expand past MaxBytes when Helm parses the manifest
// are refused in the worker; a template's error is cut to a few KiB there; the same aliases
// within the bound, and text that only looks like them, pass unchanged.
func TestRenderOutputIsBoundedInTheWorker(t *testing.T) {
	pool, err := NewPool(Options{Workers: 1})
	if err != nil {
		t.Fatal(err)
	}
	limits := Limits{Timeout: time.Minute, Memory: 256 << 20}
	// A 100 KB scalar anchored once and aliased 2,000 times: 200 MB once parsed.
	bomb := "a: &x {{ repeat 100000 \"x\" }}\nb: [{{ range until 2000 }}*x, {{ end }}*x]\n"
	j := job(bomb, nil)
	j.MaxBytes = 4 << 20
	_, err = pool.Render(context.Background(), j, limits, nil)
	var ee *ExceededError
	if !errors.As(err, &ee) || ee.Bound != BoundOutput || !strings.Contains(ee.What, "aliases expand") {
		t.Fatalf("got %v, want the output bound, for what the aliases expand to", err)
	}

	small := "a: &x [1, 2]\nb: *x\nc: \"* and & in text\"\n"
	j = job(small, nil)
	res, err := pool.Render(context.Background(), j, limits, nil)
	if err != nil || res.Files["t/templates/t.yaml"] != small {
		t.Fatalf("aliases within the bound: got %v, %v; want the text unchanged", res, err)
	}

	_, err = pool.Render(context.Background(), job(`{{ fail (repeat 10000000 "e") }}`, nil), limits, nil)
	if err == nil || len(err.Error()) > 2*maxErrorBytes || !strings.Contains(err.Error(), "bytes cut") || !strings.Contains(err.Error(), "t/templates/t.yaml") {
		t.Fatalf("got an error of %d bytes, want it cut to about %d, naming the template", len(fmt.Sprint(err)), maxErrorBytes)
	}
}

// TestRenderFrameIsBounded: the parent reads no more of a worker's answer than the job's
// output may take; a worker that sends more is stopped, and the pool renders on.
func TestRenderFrameIsBounded(t *testing.T) {
	var out bytes.Buffer
	if err := writeResult(&out, &Result{Files: map[string]string{"a": strings.Repeat("x", 1<<20)}}, 64<<10); err != nil {
		t.Fatal(err)
	}
	var res Result
	if err := readFrame(bufio.NewReader(&out), &res, 64<<10); err != nil || res.OutputBytes <= 1<<20 || res.Files != nil {
		t.Fatalf("the worker's answer over its frame: got %+v, %v; want only its size", res, err)
	}
	out.Reset()
	if err := writeFrame(&out, &Result{Error: strings.Repeat("e", 1<<20)}); err != nil {
		t.Fatal(err)
	}
	var fe *FrameError
	if err := readFrame(bufio.NewReader(&out), &res, 64<<10); !errors.As(err, &fe) || fe.Size <= 1<<20 {
		t.Fatalf("got %v, want the frame refused before it is read", err)
	}
}

// TestRenderMemoryBudget: renders whose bounds do not fit the budget together wait, in
// order; a render whose bound is over the whole budget is refused, naming it.
func TestRenderMemoryBudget(t *testing.T) {
	pool, err := NewPool(Options{Workers: 4, MemoryBudget: 300 << 20})
	if err != nil {
		t.Fatal(err)
	}
	_, err = pool.Render(context.Background(), job(`ok`, nil), Limits{Timeout: time.Minute, Memory: 400 << 20}, nil)
	var ee *ExceededError
	if !errors.As(err, &ee) || ee.Bound != BoundBudget {
		t.Fatalf("got %v, want the budget named", err)
	}
	// Two renders of 200 MiB bounds cannot run together in 300 MiB: the second waits for the
	// first (which spins until it is cancelled), and runs once it ends.
	limits := Limits{Timeout: time.Minute, Memory: 200 << 20}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	first := make(chan error, 1)
	go func() {
		_, err := pool.Render(ctx, job(`{{ range until 30000 }}{{ range until 30000 }}{{ end }}{{ end }}`, nil), limits, nil)
		first <- err
	}()
	waitFor(t, "the first render to hold its memory", func() bool {
		if pool.budget.TryAcquire(101 << 20) {
			pool.budget.Release(101 << 20)
			return false
		}
		return true
	})
	second := make(chan error, 1)
	go func() {
		quick := job(`ok`, nil)
		quick.ReleaseOptions.Namespace = "other"
		_, err := pool.Render(context.Background(), quick, limits, nil)
		second <- err
	}()
	waitFor(t, "the second render to wait for memory", func() bool { return pool.WaitingForMemory() == 1 })
	cancel()
	if err := <-first; !errors.Is(err, context.Canceled) {
		t.Fatalf("the first render: got %v, want it cancelled", err)
	}
	if err := <-second; err != nil {
		t.Fatalf("the second render, once the first ended: %v", err)
	}
}

// waitFor polls cond until it holds, failing the test, naming what it waited for, after 10 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), 10*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		return cond(), nil
	})
	if err != nil {
		t.Fatalf("timed out waiting for %s", what)
	}
}

// TestRenderPostRenders: the worker applies the job's post-renderers and common metadata to
// what the chart renders, and a patch that does not apply comes back as a PostRenderError
// naming it.
func TestRenderPostRenders(t *testing.T) {
	pool, err := NewPool(Options{Workers: 1})
	if err != nil {
		t.Fatal(err)
	}
	limits := Limits{Timeout: 10 * time.Second, Memory: 256 << 20}
	j := job("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cm}\ndata: {a: b}\n", nil)
	j.Post = &postrender.Spec{CommonMetadata: &postrender.Metadata{Labels: map[string]string{"team": "platform"}},
		PostRenderers: []postrender.PostRenderer{{Kustomize: &postrender.Kustomize{Patches: []postrender.Patch{
			{Patch: `[{"op": "add", "path": "/data/c", "value": "d"}]`, Target: &postrender.Selector{Kind: "ConfigMap"}}}}}}}
	res, err := pool.Render(context.Background(), j, limits, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := res.Files["t/templates/t.yaml"]; !strings.Contains(got, "team: platform") || !strings.Contains(got, "c: d") {
		t.Fatalf("not post-rendered:\n%s", got)
	}
	j.Post.PostRenderers[0].Kustomize.Patches[0].Patch = `[{"op": "test", "path": "/data/a", "value": "not b"}]`
	_, err = pool.Render(context.Background(), j, limits, nil)
	var pe *PostRenderError
	if !errors.As(err, &pe) || !strings.Contains(err.Error(), "postRenderers[0].kustomize.patches[0] (target ConfigMap/*)") {
		t.Fatalf("got %v, want a PostRenderError naming the patch", err)
	}
}
