package chartsource

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/rudder-operator/rudder/internal/chartsource/chartsourcetest"
	"github.com/rudder-operator/rudder/internal/guard"
	"github.com/rudder-operator/rudder/internal/helm"
)

const chartYAML = "apiVersion: v2\nname: demo\nversion: 0.1.0\n"

func cm(msg string) string {
	return "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}\ndata:\n  msg: " + msg + "\n"
}

func write(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func plainChart(t *testing.T) string {
	dir := filepath.Join(t.TempDir(), "demo")
	write(t, filepath.Join(dir, "Chart.yaml"), chartYAML)
	write(t, filepath.Join(dir, "values.yaml"), "a: 1\n")
	write(t, filepath.Join(dir, "templates", "cm.yaml"), cm("one"))
	return dir
}

// started runs a source with the chart and counts state changes.
func started(t *testing.T, dir string, opts Options) (*Source, *atomic.Int32) {
	t.Helper()
	if opts.Debounce == 0 {
		opts.Debounce = 200 * time.Millisecond
	}
	opts.Log = logr.Discard()
	s := New(opts)
	if err := s.Add(dir, nil); err != nil {
		t.Fatal(err)
	}
	var n atomic.Int32
	s.Subscribe(func(string) { n.Add(1) })
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = s.Start(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	if opts.Watch {
		waitFor(t, "the watcher's first pass over the directories", func() bool { return s.syncs.Load() > 0 })
	}
	return s, &n
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), 20*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		return cond(), nil
	})
	if err != nil {
		t.Fatalf("timed out waiting for %s", what)
	}
}

func digestOf(s *Source, dir string) string {
	st, _ := s.Get(dir)
	return st.Current.Digest
}

func TestEditInTemplatesReloads(t *testing.T) {
	dir := plainChart(t)
	s, n := started(t, dir, Options{Watch: true})
	d0 := digestOf(s, dir)
	write(t, filepath.Join(dir, "templates", "cm.yaml"), cm("two"))
	waitFor(t, "reload", func() bool { return digestOf(s, dir) != d0 })
	if n.Load() != 1 {
		t.Fatalf("%d state changes, want 1", n.Load())
	}
}

func TestNewSubdirectoryAfterStart(t *testing.T) {
	dir := plainChart(t)
	s, _ := started(t, dir, Options{Watch: true})
	d0, syncs := digestOf(s, dir), s.syncs.Load()
	write(t, filepath.Join(dir, "templates", "extra", "more.yaml"), "# a file in a new directory\n")
	waitFor(t, "reload", func() bool { return digestOf(s, dir) != d0 })
	d1 := digestOf(s, dir)
	waitFor(t, "the new directory watched", func() bool { return s.syncs.Load() > syncs })
	write(t, filepath.Join(dir, "templates", "extra", "more.yaml"), "# edited\n")
	waitFor(t, "reload of a file in the new directory", func() bool { return digestOf(s, dir) != d1 })
}

// A watched directory removed and made anew at its path (a checkout, a restore) lost its
// watch with its inode: it is watched again, and an edit in it reloads.
func TestDirectoryMadeAnewIsWatched(t *testing.T) {
	dir := plainChart(t)
	s, _ := started(t, dir, Options{Watch: true})
	d0 := digestOf(s, dir)
	if err := os.RemoveAll(filepath.Join(dir, "templates")); err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(dir, "templates", "cm.yaml"), cm("two"))
	waitFor(t, "reload", func() bool { return digestOf(s, dir) != d0 })
	// Written at once: before the directory is watched again or after, it is read.
	d1 := digestOf(s, dir)
	write(t, filepath.Join(dir, "templates", "cm.yaml"), cm("three"))
	waitFor(t, "reload of a file in the directory made anew", func() bool { return digestOf(s, dir) != d1 })
}

func TestEditorRenameSave(t *testing.T) {
	dir := plainChart(t)
	s, _ := started(t, dir, Options{Watch: true})
	d0 := digestOf(s, dir)
	tmp := filepath.Join(dir, "templates", ".cm.yaml.swp")
	write(t, tmp, cm("renamed"))
	if err := os.Rename(tmp, filepath.Join(dir, "templates", "cm.yaml")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "reload", func() bool { return digestOf(s, dir) != d0 })
	st, _ := s.Get(dir)
	if string(st.Current.Chart.Templates[0].Data) != cm("renamed") {
		t.Fatalf("template = %s", st.Current.Chart.Templates[0].Data)
	}
}

func TestBurstOfWritesIsOneReload(t *testing.T) {
	dir := plainChart(t)
	s, n := started(t, dir, Options{Watch: true, Debounce: 500 * time.Millisecond})
	for i := range 50 {
		write(t, filepath.Join(dir, "templates", "cm.yaml"), cm(fmt.Sprint("v", i)))
		time.Sleep(5 * time.Millisecond) // the writes' spacing is the subject: a burst inside the debounce
	}
	// Settled on the last write: a reload of any earlier one would have come before it.
	waitFor(t, "the last write loaded, nothing pending", func() bool {
		st, _ := s.Get(dir)
		return string(st.Current.Chart.Templates[0].Data) == cm("v49") && !s.Pending(dir)
	})
	if got := n.Load(); got != 1 {
		t.Fatalf("%d reloads for one burst, want 1", got)
	}
}

func TestBrokenChartKeepsLastGoodAndRecovers(t *testing.T) {
	dir := plainChart(t)
	s, _ := started(t, dir, Options{Watch: true})
	good := digestOf(s, dir)
	write(t, filepath.Join(dir, "templates", "cm.yaml"), "{{ .Values.a | nosuchfunc }}\n")
	waitFor(t, "failure recorded", func() bool { st, _ := s.Get(dir); return st.Err != nil })
	st, _ := s.Get(dir)
	if st.Current.Digest != good {
		t.Fatal("a broken chart replaced the last good one")
	}
	write(t, filepath.Join(dir, "templates", "cm.yaml"), cm("fixed"))
	waitFor(t, "recovery", func() bool { st, _ := s.Get(dir); return st.Err == nil && st.Current.Digest != good })
}

func publish(t *testing.T, vol string, files map[string]string) {
	t.Helper()
	if err := chartsourcetest.PublishAtomic(vol, files); err != nil {
		t.Fatal(err)
	}
}

func TestConfigMapAtomicSwap(t *testing.T) {
	vol := filepath.Join(t.TempDir(), "demo")
	publish(t, vol, map[string]string{"Chart.yaml": chartYAML, "templates/cm.yaml": cm("one")})
	s, n := started(t, vol, Options{Watch: true})
	st, _ := s.Get(vol)
	if len(st.Current.Chart.Templates) != 1 || len(st.Current.Chart.Files) != 0 {
		t.Fatalf("the ..data copies were loaded as chart files: %d templates, %d files", len(st.Current.Chart.Templates), len(st.Current.Chart.Files))
	}
	d0, syncs := st.Current.Digest, s.syncs.Load()
	publish(t, vol, map[string]string{"Chart.yaml": chartYAML, "templates/cm.yaml": cm("two")})
	waitFor(t, "reload after the swap", func() bool { return digestOf(s, vol) != d0 })
	d1 := digestOf(s, vol)
	waitFor(t, "the swapped directory watched", func() bool { return s.syncs.Load() > syncs })
	// A second swap still fires: the watch did not die with the first directory.
	publish(t, vol, map[string]string{"Chart.yaml": chartYAML, "templates/cm.yaml": cm("three")})
	waitFor(t, "reload after the second swap", func() bool { return digestOf(s, vol) != d1 })
	if n.Load() != 2 {
		t.Fatalf("%d state changes, want 2", n.Load())
	}
}

func TestRescanCatchesChangesWithoutEvents(t *testing.T) {
	dir := plainChart(t)
	s, _ := started(t, dir, Options{Watch: false, Rescan: 300 * time.Millisecond})
	d0 := digestOf(s, dir)
	write(t, filepath.Join(dir, "templates", "cm.yaml"), cm("unannounced"))
	waitFor(t, "rescan", func() bool { return digestOf(s, dir) != d0 })
}

// TestAddKeepsAChartThatNeverLoaded: a chart that does not load at start is reported and
// kept without a snapshot, so that its fix on disk is loaded like any edit.
func TestAddKeepsAChartThatNeverLoaded(t *testing.T) {
	dir := plainChart(t)
	write(t, filepath.Join(dir, "Chart.yaml"), "name: [broken\n")
	s := New(Options{Log: logr.Discard()})
	if err := s.Add(dir, nil); err == nil {
		t.Fatal("a broken chart was accepted at start")
	}
	if st, ok := s.Get(dir); !ok || st.Current != nil || st.Err == nil {
		t.Fatalf("the chart is %+v (kept: %v), want kept with its error and no snapshot", st, ok)
	}
	write(t, filepath.Join(dir, "Chart.yaml"), chartYAML)
	if _, err := s.Reload(dir); err != nil {
		t.Fatal(err)
	}
	if st, _ := s.Get(dir); st.Current == nil || st.Err != nil {
		t.Fatalf("the fixed chart is %+v, want it loaded", st)
	}
}

// TestCheckValues: a chart whose schema requires a value with no default fails its lint, and
// loads when it is checked with the values every CR gives.
func TestCheckValues(t *testing.T) {
	dir := plainChart(t)
	write(t, filepath.Join(dir, "values.schema.json"), `{"type": "object", "required": ["policy"], "properties": {"policy": {"type": "string"}}}`)
	if err := New(Options{Log: logr.Discard()}).Add(dir, nil); err == nil || !strings.Contains(err.Error(), "policy") {
		t.Fatalf("without checkValues: %v, want the lint to name the required value", err)
	}
	if err := New(Options{Log: logr.Discard()}).Add(dir, map[string]any{"policy": "strict"}); err != nil {
		t.Fatalf("with checkValues: %v", err)
	}
}

// A chart without dependencies is shared by the actions of every CR: rendering it, many at
// once, leaves it as it was. A chart with dependencies is a private copy per action.
func TestFreshChart(t *testing.T) {
	t.Parallel()
	dir := plainChart(t)
	shared := New(Options{Log: logr.Discard()})
	if err := shared.Add(dir, nil); err != nil {
		t.Fatal(err)
	}
	loaded, _ := shared.Get(dir)
	snap := loaded.Current
	reference := New(Options{Log: logr.Discard()})
	if err := reference.Add(dir, nil); err != nil {
		t.Fatal(err)
	}
	ref, _ := reference.Get(dir)
	if !reflect.DeepEqual(snap.Chart, ref.Current.Chart) {
		t.Fatal("two loads of a chart differ")
	}
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			ch, err := snap.Fresh()
			if err != nil {
				t.Error(err)
				return
			}
			if ch != snap.Chart {
				t.Error("a chart without dependencies was copied")
			}
			req := &helm.Request{ReleaseName: fmt.Sprintf("r%d", i), Scope: helm.Scope{Confinement: guard.Confinement{Namespace: "ns"}},
				Chart: ch, Values: map[string]any{"a": i, "extra": map[string]any{"b": i}}}
			if _, err := helm.Render(req, helm.StaticMapper(), nil); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if !reflect.DeepEqual(snap.Chart, ref.Current.Chart) {
		t.Error("rendering changed the shared chart")
	}

	withDeps := plainChart(t)
	write(t, filepath.Join(withDeps, "Chart.yaml"), chartYAML+"dependencies: []\n")
	own := New(Options{Log: logr.Discard()})
	if err := own.Add(withDeps, nil); err != nil {
		t.Fatal(err)
	}
	loaded, _ = own.Get(withDeps)
	a, err := loaded.Current.Fresh()
	if err != nil {
		t.Fatal(err)
	}
	if a == loaded.Current.Chart {
		t.Error("a chart with a dependency list was shared")
	}
}
