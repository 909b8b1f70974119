package render

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"runtime/debug"
	"runtime/metrics"
	"sync/atomic"
	"time"

	"helm.sh/helm/v4/pkg/chart/common"
	commonutil "helm.sh/helm/v4/pkg/chart/common/util"
	chartutil "helm.sh/helm/v4/pkg/chart/v2/util"
	"helm.sh/helm/v4/pkg/engine"
	releaseutil "helm.sh/helm/v4/pkg/release/v1/util"
	"k8s.io/client-go/rest"
)

// The environment that makes a process a worker.
const (
	envWorker = "RUDDER_RENDER_WORKER"
	envSocket = "RUDDER_RENDER_SOCKET"
)

// workerStack is a worker's goroutine stack limit: a template recursing through tpl dies
// here, in a fraction of the second and memory it takes to reach Go's default of 1 GB.
const workerStack = 64 << 20

// exitMemory is the exit code of a worker that went over its render's memory bound.
const exitMemory = 3

func init() {
	if os.Getenv(envWorker) != "1" {
		return
	}
	// A worker is this binary re-executed (see Pool): it has no main of its own, so it ends
	// here, before the program's main runs.
	os.Exit(serve(os.Stdin, os.NewFile(3, "results"), os.Getenv(envSocket)))
}

// serve renders the jobs read from in, one at a time, and writes each Result to out. It
// returns when in closes.
func serve(in io.Reader, out io.Writer, socket string) int {
	debug.SetMaxStack(workerStack)
	m := &monitor{kick: make(chan struct{}, 1)}
	go m.watch()
	lookups := lookupConfig(socket)
	r := bufio.NewReader(in)
	for {
		var job Job
		if err := readFrame(r, &job, maxJobFrame); err != nil {
			if errors.Is(err, io.EOF) {
				return 0
			}
			fmt.Fprintln(os.Stderr, "rudder render worker:", err)
			return 1
		}
		m.begin(job.MemoryBytes)
		res := renderJob(&job, lookups)
		m.disarm()
		if inUse() > retainAfterRender {
			// A big render: give its memory back now, so that the next render's bound is
			// measured from a small heap.
			debug.FreeOSMemory()
		}
		if err := writeResult(out, res, job.MaxFrame); err != nil {
			fmt.Fprintln(os.Stderr, "rudder render worker:", err)
			return 1
		}
	}
}

// writeResult writes res, or, when it is larger than limit bytes, what says so.
func writeResult(out io.Writer, res *Result, limit int64) error {
	b, err := json.Marshal(res)
	if err != nil {
		return err
	}
	if limit > 0 && int64(len(b)) > limit {
		if b, err = json.Marshal(&Result{OutputBytes: int64(len(b))}); err != nil {
			return err
		}
	}
	return writeBytes(out, b)
}

// retainAfterRender is how much memory a worker keeps between renders before it returns it.
const retainAfterRender = 64 << 20

// inUse is the worker's memory the Go runtime holds from the system and has not returned.
func inUse() int64 {
	samples := []metrics.Sample{{Name: "/memory/classes/total:bytes"}, {Name: "/memory/classes/heap/released:bytes"}}
	metrics.Read(samples)
	return int64(samples[0].Value.Uint64() - samples[1].Value.Uint64())
}

// monitor ends the worker when its memory passes the bound of the render it runs (the parent
// also kills it, from outside, when its resident memory does), or when its parent is gone.
// It looks every watchEvery while a render runs, and only every parentEvery between renders:
// an idle worker costs no CPU.
type monitor struct {
	limit atomic.Int64
	kick  chan struct{}
}

const watchEvery, parentEvery = 5 * time.Millisecond, time.Second

// begin starts watching a render bounded to limit bytes (0: unbounded).
func (m *monitor) begin(limit int64) {
	if limit > 0 {
		// The runtime collects harder as it nears the bound, well before the watch ends it.
		debug.SetMemoryLimit(limit - limit/8)
	}
	m.limit.Store(limit)
	select {
	case m.kick <- struct{}{}:
	default:
	}
}

func (m *monitor) disarm() { m.limit.Store(0) }

func (m *monitor) watch() {
	parent := os.Getppid()
	t := time.NewTimer(parentEvery)
	for {
		select {
		case <-m.kick:
		case <-t.C:
		}
		if os.Getppid() != parent {
			os.Exit(0)
		}
		for l := m.limit.Load(); l > 0; l = m.limit.Load() {
			if used := inUse(); used > l {
				fmt.Fprintf(os.Stderr, "rudder render: memory bound exceeded: %d bytes in use, the bound is %d\n", used, l)
				os.Exit(exitMemory)
			}
			time.Sleep(watchEvery) // the monitor's cadence while a render runs: time is what it watches by
		}
		t.Reset(parentEvery)
	}
}

// renderJob renders as Helm's install and upgrade do before they render: dependencies
// processed (conditions, tags, import-values), values coalesced and validated against the
// charts' schemas (schema.go: their references confined to the chart), then the engine. Its
// output is then bounded (output.go), post-rendered (internal/postrender) and bounded again.
func renderJob(job *Job, lookups *rest.Config) *Result {
	ch := job.Chart.Chart()
	vals := map[string]any(job.Values)
	if vals == nil {
		vals = map[string]any{}
	}
	if err := chartutil.ProcessDependencies(ch, vals); err != nil {
		return &Result{Error: cutError(err.Error())}
	}
	rv, err := commonutil.ToRenderValuesWithSchemaValidation(ch, vals, job.ReleaseOptions, job.Caps, true)
	if err != nil {
		return &Result{Error: cutError(err.Error())}
	}
	coalesced, ok := rv["Values"].(common.Values)
	if !ok {
		return &Result{Error: fmt.Sprintf("the render values hold %T, not Helm's values", rv["Values"])}
	}
	if err := ValidateValues(ch, coalesced); err != nil {
		return &Result{Error: cutError(err.Error())}
	}
	var files map[string]string
	if job.Lookups {
		files, err = engine.New(lookups).RenderWithContext(context.Background(), ch, rv)
	} else {
		files, err = engine.Render(ch, rv)
	}
	if err != nil {
		return &Result{Error: cutError(err.Error())}
	}
	// Bounded before the post-renderers parse it, and after, since patches add to it.
	if over := bounded(files, job.MaxBytes); over != nil {
		return over
	}
	if !job.Post.Empty() {
		if files, err = job.Post.Apply(files, releaseutil.SplitManifests); err != nil {
			return &Result{Error: cutError(err.Error()), PostRender: true}
		}
		if over := bounded(files, job.MaxBytes); over != nil {
			return over
		}
	}
	res := &Result{Files: files}
	for _, crd := range ch.CRDObjects() {
		res.CRDs = append(res.CRDs, &common.File{Name: crd.Filename, Data: crd.File.Data})
	}
	return res
}

// bounded is the Result of output over max bytes, as text or as what Helm parses it to; nil
// when it is within (or max is 0).
func bounded(files map[string]string, max int64) *Result {
	if max <= 0 {
		return nil
	}
	size := int64(0)
	for _, f := range files {
		size += int64(len(f))
	}
	if size > max {
		return &Result{OutputBytes: size}
	}
	parsed, err := parsedSize(files, max)
	if err != nil {
		return &Result{Error: cutError(err.Error())}
	}
	if parsed > max {
		return &Result{OutputBytes: parsed, Parsed: true}
	}
	return nil
}

// lookupConfig is the configuration the engine's lookups use: the parent, on the socket, over
// one transport, so that every lookup of every render reuses its connections (client-go makes
// a new transport for each client of a config with a Dial of its own, and Helm makes clients
// per lookup).
func lookupConfig(socket string) *rest.Config {
	tr := &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", socket)
		},
		MaxIdleConnsPerHost: lookupConns,
		MaxConnsPerHost:     lookupConns,
		IdleConnTimeout:     lookupIdle,
	}
	return &rest.Config{Host: "http://rudder-render", Transport: tr, QPS: -1}
}

// lookupConns is how many connections a worker's lookups hold to the parent; lookupIdle how
// long one stays open unused. The parent serves no more than that per worker.
const (
	lookupConns = 2
	lookupIdle  = 30 * time.Second
)
