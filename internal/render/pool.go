package render

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/semaphore"
)

// Options configure a Pool. Zero fields take the defaults.
type Options struct {
	// Workers is the most renders at once (default: the CPUs, at least 2).
	Workers int
	// Executable is the worker binary (default: this process's).
	Executable string
	// MemoryBudget bounds the sum of the memory bounds of the renders that run at once (0: no
	// bound but each render's own): a render whose bound does not fit waits its turn, in
	// order. Set it to what the pod's memory limit leaves beside rudder itself (see
	// MemoryLimit).
	MemoryBudget int64
}

// Pool renders on worker processes, started when first needed and kept for the next render.
// Safe for concurrent use.
type Pool struct {
	exe   string
	slots chan struct{}
	// budget holds the memory bounds of the renders under way (nil: no budget); budgetBytes
	// is its size.
	budget      *semaphore.Weighted
	budgetBytes int64
	waiting     atomic.Int32
	// share is how many renders of one namespace run at once: a namespace whose renders all
	// run to their timeout leaves the others a worker.
	share int

	mu sync.Mutex
	// rendering counts the renders under way per namespace, queued those waiting for their
	// namespace's turn; turn is signalled when one ends.
	rendering, queued map[string]int
	turn              *sync.Cond
	idle              []*process
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
	p := &Pool{exe: exe, slots: make(chan struct{}, n), share: max(1, n/2), rendering: map[string]int{}, queued: map[string]int{}}
	if opts.MemoryBudget > 0 {
		p.budget, p.budgetBytes = semaphore.NewWeighted(opts.MemoryBudget), opts.MemoryBudget
	}
	p.turn = sync.NewCond(&p.mu)
	return p, nil
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

// Render runs job on a worker. A render the worker cannot finish within limits is stopped and
// returned as an *ExceededError; a template's own failure as an error with Helm's words.
// Before it starts, a render waits for its namespace's share, for its memory bound to fit the
// budget, and for a worker.
func (p *Pool) Render(ctx context.Context, job *Job, limits Limits, up *Upstream) (res *Result, err error) {
	defer func(start time.Time) { observeRender(start, err) }(time.Now())
	if p.budget != nil && limits.Memory > p.budgetBytes {
		return nil, &ExceededError{Bound: BoundBudget, Max: p.budgetBytes,
			What: fmt.Sprintf("the render's memory bound of %d bytes is more than the %d bytes all renders may hold at once (the pod's memory "+
				"limit less rudder's own)", limits.Memory, p.budgetBytes)}
	}
	if err := p.enter(ctx, job.ReleaseOptions.Namespace); err != nil {
		return nil, err
	}
	defer p.leave(job.ReleaseOptions.Namespace)
	if p.budget != nil && limits.Memory > 0 {
		p.waiting.Add(1)
		rendersWaitingForMemory.Inc()
		err := p.budget.Acquire(ctx, limits.Memory)
		rendersWaitingForMemory.Dec()
		p.waiting.Add(-1)
		if err != nil {
			return nil, err
		}
		defer p.budget.Release(limits.Memory)
	}
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
	job.MaxFrame = maxFrame(job)
	w.upstream.Store(up)
	defer w.upstream.Store(nil)
	res, err = w.run(ctx, job, limits)
	if err != nil {
		p.end(w)
		return nil, err
	}
	p.put(w)
	if res.Error != "" && res.PostRender {
		return nil, &PostRenderError{Msg: res.Error}
	}
	if res.Error != "" {
		return nil, errors.New(res.Error)
	}
	if res.OutputBytes > 0 {
		what := fmt.Sprintf("the render wrote %d bytes, over the %d the release may render", res.OutputBytes, job.MaxBytes)
		if res.Parsed {
			what = fmt.Sprintf("the render's YAML parses to %d bytes (its aliases expand), over the %d the release may render", res.OutputBytes,
				job.MaxBytes)
		}
		return nil, &ExceededError{Bound: BoundOutput, Max: job.MaxBytes, What: what}
	}
	return res, nil
}

// WaitingForMemory is how many renders wait for their memory bound to fit the budget.
func (p *Pool) WaitingForMemory() int { return int(p.waiting.Load()) }

// maxFrame is the largest Result a worker may send for job: its output bound, as JSON escapes
// it (a newline or a quote takes two bytes), and the chart's own crds/, which the Result
// carries back.
func maxFrame(job *Job) int64 {
	if job.MaxBytes <= 0 {
		return maxJobFrame
	}
	crds := int64(0)
	var walk func(*Tree)
	walk = func(t *Tree) {
		for _, f := range t.Files {
			if strings.HasPrefix(f.Name, "crds/") {
				crds += int64(len(f.Data)) + int64(len(f.Name))
			}
		}
		for _, d := range t.Dependencies {
			walk(d)
		}
	}
	walk(job.Chart)
	return 2*(job.MaxBytes+crds) + 1<<20
}

// enter waits until namespace ns has fewer than its share of renders under way.
func (p *Pool) enter(ctx context.Context, ns string) error {
	stop := context.AfterFunc(ctx, func() {
		p.mu.Lock()
		defer p.mu.Unlock()
		p.turn.Broadcast()
	})
	defer stop()
	p.mu.Lock()
	defer p.mu.Unlock()
	for p.rendering[ns] >= p.share {
		if err := ctx.Err(); err != nil {
			return err
		}
		p.queued[ns]++
		p.turn.Wait()
		if p.queued[ns]--; p.queued[ns] == 0 {
			delete(p.queued, ns)
		}
	}
	p.rendering[ns]++
	return nil
}

func (p *Pool) leave(ns string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.rendering[ns]--; p.rendering[ns] <= 0 {
		delete(p.rendering, ns)
	}
	p.turn.Broadcast()
}

// idleFor is how long a worker waits for its next render before it is stopped: a rudder
// with nothing to render holds no workers.
const idleFor = time.Minute

func (p *Pool) take() (*process, error) {
	p.mu.Lock()
	for n := len(p.idle); n > 0; n = len(p.idle) {
		w := p.idle[n-1]
		p.idle = p.idle[:n-1]
		if w.expiry.Stop() {
			p.mu.Unlock()
			return w, nil
		}
		// Expired meanwhile: its timer stops it.
	}
	p.mu.Unlock()
	w, err := start(p.exe)
	if err != nil {
		return nil, err
	}
	return w, nil
}

func (p *Pool) put(w *process) {
	p.mu.Lock()
	defer p.mu.Unlock()
	w.expiry = time.AfterFunc(idleFor, func() {
		p.mu.Lock()
		if i := slices.Index(p.idle, w); i >= 0 {
			p.idle = slices.Delete(p.idle, i, i+1)
		}
		p.mu.Unlock()
		p.end(w)
	})
	p.idle = append(p.idle, w)
}

// end stops a worker that failed, was stopped mid-render, or was idle too long.
func (p *Pool) end(w *process) { w.stop() }
