package render

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"helm.sh/helm/v4/pkg/chart/common"
	chart "helm.sh/helm/v4/pkg/chart/v2"

	"github.com/rudder-operator/rudder/internal/postrender"
)

// Job is one render: what Helm's install or upgrade renders a chart from.
type Job struct {
	Chart          *Tree
	Values         Values
	ReleaseOptions common.ReleaseOptions
	Caps           *common.Capabilities
	// Lookups: a template's lookup reaches the API server (through the parent); otherwise it
	// finds nothing, as in `helm template`.
	Lookups bool
	// Post is what the watch layers on the chart's output (post-renderers, common metadata),
	// applied to it before it is bounded, returned and checked.
	Post *postrender.Spec
	// MaxBytes bounds the rendered output, both as text and as what Helm parses it to (see
	// output.go); MemoryBytes the worker's memory while it renders.
	MaxBytes    int64
	MemoryBytes int64
	// MaxFrame bounds the Result as it is sent back (set by Pool.Render): the parent reads no
	// more than that of it.
	MaxFrame int64
}

// Result is what a render made: Helm's engine output, file by file (keyed as the engine keys
// them, "<chart>/templates/x.yaml", "<chart>/charts/<sub>/templates/y.yaml"), and the crds/
// files of the charts that stay enabled, named by their full path.
type Result struct {
	Files map[string]string
	CRDs  []*common.File
	// Error is the render's own error (a template that fails), as Helm words it.
	Error string
	// PostRender: Error is a post-renderer's, not the chart's.
	PostRender bool
	// OutputBytes, when set, is the size of an output over the job's MaxBytes (then Files is
	// empty); Parsed says that it is the size of what Helm parses the output to, which YAML
	// aliases made larger than the text.
	OutputBytes int64
	Parsed      bool
}

// PostRenderError: the watch's post-renderers or common metadata failed on what the chart
// rendered (a patch that does not apply names itself and its target).
type PostRenderError struct{ Msg string }

func (e *PostRenderError) Error() string { return "post-rendering: " + e.Msg }

// Tree is a chart with its dependencies, which chart.Chart's JSON leaves out.
type Tree struct {
	Metadata     *chart.Metadata
	Lock         *chart.Lock
	Templates    []*common.File
	Values       Values
	Schema       []byte
	Files        []*common.File
	Dependencies []*Tree
}

// TreeOf is a chart as a Tree.
func TreeOf(ch *chart.Chart) *Tree {
	t := &Tree{Metadata: ch.Metadata, Lock: ch.Lock, Templates: ch.Templates, Values: ch.Values, Schema: ch.Schema, Files: ch.Files}
	for _, d := range ch.Dependencies() {
		t.Dependencies = append(t.Dependencies, TreeOf(d))
	}
	return t
}

// Chart is the Tree as a chart.
func (t *Tree) Chart() *chart.Chart {
	ch := &chart.Chart{Metadata: t.Metadata, Lock: t.Lock, Templates: t.Templates, Values: t.Values, Schema: t.Schema, Files: t.Files}
	for _, d := range t.Dependencies {
		ch.AddDependency(d.Chart())
	}
	return ch
}

// Values are Helm values that keep their numbers' types across the process boundary: an
// integer (int64, as a CR's spec has it) stays an integer and a float64 (as values.yaml has
// every number) a float64, so that templates print and compare them as in process.
type Values map[string]any

func (v Values) MarshalJSON() ([]byte, error) { return json.Marshal(typed(map[string]any(v))) }

func (v *Values) UnmarshalJSON(b []byte) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil {
		return err
	}
	out, err := untyped(m)
	if err != nil {
		return err
	}
	if out != nil {
		*v = out.(map[string]any)
	}
	return nil
}

// floatNumber is a float64 written so that it reads back as one ("3.0", not "3").
type floatNumber float64

func (f floatNumber) MarshalJSON() ([]byte, error) {
	s := strconv.FormatFloat(float64(f), 'g', -1, 64)
	if !strings.ContainsAny(s, ".eEnN") {
		s += ".0"
	}
	return []byte(s), nil
}

func typed(v any) any {
	switch t := v.(type) {
	case map[string]any:
		m := make(map[string]any, len(t))
		for k, e := range t {
			m[k] = typed(e)
		}
		return m
	case common.Values:
		return typed(map[string]any(t))
	case []any:
		s := make([]any, len(t))
		for i, e := range t {
			s[i] = typed(e)
		}
		return s
	case float64:
		return floatNumber(t)
	case float32:
		return floatNumber(t)
	}
	return v
}

func untyped(v any) (any, error) {
	switch t := v.(type) {
	case map[string]any:
		for k, e := range t {
			u, err := untyped(e)
			if err != nil {
				return nil, err
			}
			t[k] = u
		}
		return t, nil
	case []any:
		for i, e := range t {
			u, err := untyped(e)
			if err != nil {
				return nil, err
			}
			t[i] = u
		}
		return t, nil
	case json.Number:
		if strings.ContainsAny(string(t), ".eE") {
			return t.Float64()
		}
		if i, err := t.Int64(); err == nil {
			return i, nil
		}
		return t.Float64()
	}
	return v, nil
}

// maxJobFrame bounds a Job as a worker reads it (the parent is trusted; the bound is against a
// broken pipe).
const maxJobFrame = 512 << 20

// writeFrame writes v as one length-prefixed JSON message.
func writeFrame(w io.Writer, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return writeBytes(w, b)
}

func writeBytes(w io.Writer, b []byte) error {
	var n [4]byte
	binary.BigEndian.PutUint32(n[:], uint32(len(b)))
	if _, err := w.Write(n[:]); err != nil {
		return err
	}
	_, err := w.Write(b)
	return err
}

// FrameError: a message was larger than its reader accepts; nothing of it was read.
type FrameError struct{ Size, Max int64 }

func (e *FrameError) Error() string {
	return fmt.Sprintf("render: a message of %d bytes is over the %d limit", e.Size, e.Max)
}

// readFrame reads one message written by writeFrame into v, refusing one over max bytes before
// it reads it.
func readFrame(r *bufio.Reader, v any, max int64) error {
	var n [4]byte
	if _, err := io.ReadFull(r, n[:]); err != nil {
		return err
	}
	size := int64(binary.BigEndian.Uint32(n[:]))
	if size > max {
		return &FrameError{Size: size, Max: max}
	}
	b := make([]byte, size)
	if _, err := io.ReadFull(r, b); err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return err
	}
	return json.Unmarshal(b, v)
}
