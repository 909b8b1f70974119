package render

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"runtime/debug"
	"runtime/metrics"
	"sync/atomic"
	"time"

	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
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
	var limit atomic.Int64
	go watch(&limit)
	r := bufio.NewReader(in)
	for {
		var job Job
		if err := readFrame(r, &job); err != nil {
			if errors.Is(err, io.EOF) {
				return 0
			}
			fmt.Fprintln(os.Stderr, "rudder render worker:", err)
			return 1
		}
		limit.Store(job.MemoryBytes)
		if job.MemoryBytes > 0 {
			debug.SetMemoryLimit(job.MemoryBytes)
		}
		res := renderJob(&job, socket)
		limit.Store(0)
		if inUse() > retainAfterRender {
			// A big render: give its memory back now, so that the next render's bound is
			// measured from a small heap.
			debug.FreeOSMemory()
		}
		if err := writeFrame(out, res); err != nil {
			fmt.Fprintln(os.Stderr, "rudder render worker:", err)
			return 1
		}
	}
}

// retainAfterRender is how much memory a worker keeps between renders before it returns it.
const retainAfterRender = 64 << 20

// inUse is the worker's memory the Go runtime holds from the system and has not returned.
func inUse() int64 {
	samples := []metrics.Sample{{Name: "/memory/classes/total:bytes"}, {Name: "/memory/classes/heap/released:bytes"}}
	metrics.Read(samples)
	return int64(samples[0].Value.Uint64() - samples[1].Value.Uint64())
}

// watch ends the worker when its memory passes the bound of the render it runs (the parent
// also kills it, from outside, when its resident memory does), or when its parent is gone.
func watch(limit *atomic.Int64) {
	parent := os.Getppid()
	for i := 0; ; i++ {
		time.Sleep(5 * time.Millisecond)
		if l := limit.Load(); l > 0 {
			if used := inUse(); used > l {
				fmt.Fprintf(os.Stderr, "rudder render: memory bound exceeded: %d bytes in use, the bound is %d\n", used, l)
				os.Exit(exitMemory)
			}
		}
		if i%100 == 0 && os.Getppid() != parent {
			os.Exit(0)
		}
	}
}

// renderJob renders as Helm's install and upgrade do before they render: dependencies
// processed (conditions, tags, import-values), values coalesced and validated against the
// charts' schemas, then the engine.
func renderJob(job *Job, socket string) *Result {
	ch := job.Chart.Chart()
	vals := map[string]any(job.Values)
	if vals == nil {
		vals = map[string]any{}
	}
	if err := chartutil.ProcessDependenciesWithMerge(ch, vals); err != nil {
		return &Result{Error: err.Error()}
	}
	rv, err := chartutil.ToRenderValuesWithSchemaValidation(ch, vals, job.Options, job.Caps, false)
	if err != nil {
		return &Result{Error: err.Error()}
	}
	var files map[string]string
	if job.Lookups {
		files, err = engine.New(lookupConfig(socket)).Render(ch, rv)
	} else {
		files, err = engine.Render(ch, rv)
	}
	if err != nil {
		return &Result{Error: err.Error()}
	}
	size := int64(0)
	for _, f := range files {
		size += int64(len(f))
	}
	if job.MaxBytes > 0 && size > job.MaxBytes {
		return &Result{OutputBytes: size}
	}
	res := &Result{Files: files}
	for _, crd := range ch.CRDObjects() {
		res.CRDs = append(res.CRDs, &chart.File{Name: crd.Filename, Data: crd.File.Data})
	}
	return res
}

// lookupConfig is the configuration the engine's lookups use: the parent, on the socket.
func lookupConfig(socket string) *rest.Config {
	return &rest.Config{
		Host: "http://rudder-render",
		Dial: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", socket)
		},
		QPS: -1,
	}
}
