// Package lazylog defers the cost of a logger's context until a line is written.
//
// controller-runtime builds a logger for every reconcile: the controller's, with the object's
// kind, namespace and name and a reconcileID added. With zap each WithValues encodes its values
// at once (a reflected JSON encoding of the object reference among them), and most passes of
// a converged CR write no line at all. A logger made by New keeps WithValues and WithName as
// a chain of what was asked, and applies the chain to the logger it wraps only when a line is
// written: a pass that writes nothing costs a few small allocations, and a line comes out as
// the wrapped logger would have written it.
package lazylog

import (
	"slices"

	"github.com/go-logr/logr"
)

// New wraps base: the logger it returns writes what base would, with WithValues and WithName
// deferred until a line is written.
func New(base logr.Logger) logr.Logger {
	s := base.GetSink()
	if s == nil {
		return base // logr.Discard
	}
	return logr.New(&sink{base: s})
}

// sink is one link of the chain: the root holds the wrapped sink, each other link what one
// WithValues, WithName or WithCallDepth added to its parent.
type sink struct {
	parent *sink
	base   logr.LogSink // the root's

	kvs   []any
	name  string
	depth int
}

// Init is called by logr.New; the wrapped sink was initialized by its own logger.
func (s *sink) Init(logr.RuntimeInfo) {}

func (s *sink) root() *sink {
	for s.parent != nil {
		s = s.parent
	}
	return s
}

// Enabled asks the wrapped sink: a level is the same whatever the context.
func (s *sink) Enabled(level int) bool { return s.root().base.Enabled(level) }

func (s *sink) Info(level int, msg string, kvs ...any) { s.build(1).Info(level, msg, kvs...) }

func (s *sink) Error(err error, msg string, kvs ...any) { s.build(1).Error(err, msg, kvs...) }

// WithValues keeps a copy of kvs: a caller may pass a slice it changes after.
func (s *sink) WithValues(kvs ...any) logr.LogSink {
	return &sink{parent: s, kvs: slices.Clone(kvs)}
}

func (s *sink) WithName(name string) logr.LogSink {
	return &sink{parent: s, name: name}
}

// WithCallDepth is kept in the chain like the rest: the wrapped sink learns it when a line
// is written.
func (s *sink) WithCallDepth(depth int) logr.LogSink {
	return &sink{parent: s, depth: depth}
}

// build applies the chain to the wrapped sink, the links in the order they were made, and
// adds frames to the call depth (those of sink's own Info or Error).
func (s *sink) build(frames int) logr.LogSink {
	if s.parent == nil {
		return withCallDepth(s.base, frames)
	}
	out := s.parent.build(0)
	switch {
	case len(s.kvs) > 0:
		out = out.WithValues(s.kvs...)
	case s.name != "":
		out = out.WithName(s.name)
	}
	return withCallDepth(out, s.depth+frames)
}

func withCallDepth(s logr.LogSink, depth int) logr.LogSink {
	if cd, ok := s.(logr.CallDepthLogSink); ok && depth > 0 {
		return cd.WithCallDepth(depth)
	}
	return s
}
