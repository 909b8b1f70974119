package render

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"runtime"
	"sync"
	"time"
)

// Options configure a Pool. Zero fields take the defaults.
type Options struct {
	// Workers is the most renders at once (default: the CPUs, at least 2).
	Workers int
	// Executable is the worker binary (default: this process's).
	Executable string
}

// Pool renders on worker processes, started when first needed and kept for the next render.
// Safe for concurrent use.
type Pool struct {
	exe   string
	slots chan struct{}

	mu   sync.Mutex
	idle []*worker
	// cpu is what the workers that ended used (user and system), for the benchmarks.
	cpu time.Duration
	all map[*worker]bool
}

// NewPool makes a Pool.
func NewPool(opts Options) (*Pool, error) {
	exe := opts.Executable
	if exe == "" {
		var err error
		if exe, err = os.Executable(); err != nil {
			return nil, fmt.Errorf("render: finding this program to run workers: %w", err)
		}
	}
	n := opts.Workers
	if n <= 0 {
		n = max(runtime.NumCPU(), 2)
	}
	sweepSocketDirs()
	return &Pool{exe: exe, slots: make(chan struct{}, n), all: map[*worker]bool{}}, nil
}

var (
	defaultPool     *Pool
	defaultPoolErr  error
	defaultPoolOnce sync.Once
)

// Default is the process's shared Pool.
func Default() (*Pool, error) {
	defaultPoolOnce.Do(func() { defaultPool, defaultPoolErr = NewPool(Options{}) })
	return defaultPool, defaultPoolErr
}

// DefaultTimeout bounds a render whose Limits set no timeout.
const DefaultTimeout = 30 * time.Second

// Limits bound one render.
type Limits struct {
	Timeout time.Duration
	// Memory bounds the worker's memory while it renders.
	Memory int64
}

// ExceededError: a render went past one of its bounds, and was stopped.
type ExceededError struct {
	// Bound is "renderTimeout", "renderMemory", "stack" or "output"; Max its value (bytes, or
	// nanoseconds for the timeout).
	Bound string
	Max   int64
	What  string
}

func (e *ExceededError) Error() string { return e.What }

// Upstream is where a render's lookups go: the API server's URL and the transport of the
// action the render is for (its identity and its guard).
type Upstream struct {
	URL       *url.URL
	Transport http.RoundTripper
}

// Render runs job on a worker. A render the worker cannot finish within limits is stopped and
// returned as an *ExceededError; a template's own failure as an error with Helm's words.
func (p *Pool) Render(ctx context.Context, job *Job, limits Limits, up *Upstream) (*Result, error) {
	select {
	case p.slots <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	defer func() { <-p.slots }()
	if limits.Timeout <= 0 {
		limits.Timeout = DefaultTimeout
	}
	w, err := p.take()
	if err != nil {
		return nil, err
	}
	job.MemoryBytes = limits.Memory
	w.upstream.Store(up)
	defer w.upstream.Store(nil)
	res, err := w.run(ctx, job, limits)
	if err != nil {
		p.end(w)
		return nil, err
	}
	p.put(w)
	if res.Error != "" {
		return nil, errors.New(res.Error)
	}
	if res.OutputBytes > 0 {
		return nil, &ExceededError{Bound: "output", Max: job.MaxBytes,
			What: fmt.Sprintf("the render wrote %d bytes, over the %d the release may render", res.OutputBytes, job.MaxBytes)}
	}
	return res, nil
}

// CPU is the CPU time the pool's workers used so far.
func (p *Pool) CPU() time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	total := p.cpu
	for w := range p.all {
		total += w.cpu()
	}
	return total
}

func (p *Pool) take() (*worker, error) {
	p.mu.Lock()
	if n := len(p.idle); n > 0 {
		w := p.idle[n-1]
		p.idle = p.idle[:n-1]
		p.mu.Unlock()
		return w, nil
	}
	p.mu.Unlock()
	w, err := start(p.exe)
	if err != nil {
		return nil, err
	}
	p.mu.Lock()
	p.all[w] = true
	p.mu.Unlock()
	return w, nil
}

func (p *Pool) put(w *worker) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.idle = append(p.idle, w)
}

// end stops a worker that failed or was stopped mid-render.
func (p *Pool) end(w *worker) {
	w.stop()
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.all, w)
	if w.cmd.ProcessState != nil {
		p.cpu += w.cmd.ProcessState.UserTime() + w.cmd.ProcessState.SystemTime()
	}
}
