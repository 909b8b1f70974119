package lazylog

import (
	"errors"
	"testing"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
)

// A lazy logger writes each line as the logger it wraps would: the same names, values, level
// and caller, whatever the order of WithName and WithValues.
func TestLinesAreTheWrappedLoggers(t *testing.T) {
	var lines []string
	base := funcr.New(func(prefix, args string) { lines = append(lines, prefix+" "+args) },
		funcr.Options{LogCaller: funcr.All, Verbosity: 1})
	write := func(l logr.Logger) {
		l = l.WithName("controller").WithValues("namespace", "ns", "name", "w").WithName("pass").WithValues("reconcileID", "r1")
		l.Info("installed", "revision", 1)
		l.V(1).Info("looked", "objects", 2)
		l.V(2).Info("not written")
		l.Error(errors.New("boom"), "failed")
		l.WithCallDepth(0).Info("depth")
	}
	write(base)
	eager := lines
	lines = nil
	write(New(base))
	if len(lines) != len(eager) || len(eager) != 4 {
		t.Fatalf("lazy wrote %d lines, the wrapped logger %d, want 4", len(lines), len(eager))
	}
	for i := range eager {
		if lines[i] != eager[i] {
			t.Errorf("line %d:\n  lazy:    %s\n  wrapped: %s", i, lines[i], eager[i])
		}
	}
}

// counting counts what reaches the wrapped sink.
type counting struct {
	logr.LogSink
	withValues, withName *int
}

func (c counting) WithValues(kvs ...any) logr.LogSink {
	*c.withValues++
	return counting{c.LogSink.WithValues(kvs...), c.withValues, c.withName}
}

func (c counting) WithName(name string) logr.LogSink {
	*c.withName++
	return counting{c.LogSink.WithName(name), c.withValues, c.withName}
}

// Until a line is written, WithValues and WithName do not reach the wrapped sink; a line
// below the logger's verbosity writes nothing and builds nothing.
func TestContextIsAppliedOnlyForALine(t *testing.T) {
	var withValues, withName, written int
	base := logr.New(counting{funcr.New(func(string, string) { written++ }, funcr.Options{}).GetSink(), &withValues, &withName})
	l := New(base).WithName("controller").WithValues("namespace", "ns").WithValues("reconcileID", "r1")
	l.V(1).Info("below the verbosity")
	if withValues+withName+written != 0 {
		t.Fatalf("before a line: %d WithValues, %d WithName, %d lines reached the wrapped logger", withValues, withName, written)
	}
	l.Info("a line")
	if withValues != 2 || withName != 1 || written != 1 {
		t.Fatalf("for a line: %d WithValues, %d WithName, %d lines; want 2, 1, 1", withValues, withName, written)
	}
}

func TestDiscardStaysDiscard(t *testing.T) {
	if New(logr.Discard()).GetSink() != nil {
		t.Fatal("a discarding logger was wrapped")
	}
}

// The values a line carries are those given to WithValues, even when the caller changes its
// slice after.
func TestValuesAreKeptAsGiven(t *testing.T) {
	var line string
	base := funcr.New(func(_, args string) { line = args }, funcr.Options{})
	kvs := []any{"name", "w"}
	l := New(base).WithValues(kvs...)
	kvs[1] = "changed"
	l.Info("x")
	if line != `"level"=0 "msg"="x" "name"="w"` {
		t.Fatalf("line %s", line)
	}
}
