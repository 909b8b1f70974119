package render

import (
	"net/http"
	"net/url"
	"time"
)

// What bounds a render, and what a render that went past a bound returns: the pool and the
// worker processes both build on them.

// DefaultTimeout bounds a render whose Limits set no timeout.
const DefaultTimeout = 30 * time.Second

// Limits bound one render.
type Limits struct {
	Timeout time.Duration
	// Memory bounds the worker's memory while it renders.
	Memory int64
}

// The bounds a render is stopped at: the render's own names, which internal/helm maps onto the
// watch's limits (renderTimeout, renderMemory, maxManifestBytes).
const (
	BoundTimeout = "timeout"
	BoundMemory  = "memory"
	BoundStack   = "stack"
	BoundOutput  = "output"
	// BoundBudget: the render's memory bound is larger than the pool's whole budget, so it
	// can never run.
	BoundBudget = "budget"
)

// ExceededError: a render went past one of its bounds, and was stopped.
type ExceededError struct {
	// Bound is one of BoundTimeout, BoundMemory, BoundStack, BoundOutput and BoundBudget; Max
	// its value (bytes, or nanoseconds for the timeout).
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
