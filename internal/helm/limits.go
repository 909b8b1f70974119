package helm

import (
	"bytes"
	"fmt"
	"strconv"
	"time"

	release "helm.sh/helm/v4/pkg/release/v1"

	"github.com/rudder-operator/rudder/internal/guard"
	"github.com/rudder-operator/rudder/internal/render"
)

// Limits bound what one release may render and how long one of its actions may wait, so that
// one CR can neither flood its namespace nor hold rudder's workers. A zero field takes its
// default.
type Limits struct {
	// MaxObjects is the most objects a release renders, its manifest and hooks together
	// (default DefaultMaxObjects).
	MaxObjects int
	// MaxManifestBytes is the largest rendered manifest, and the largest sum of its hooks'
	// manifests (default DefaultMaxManifestBytes).
	MaxManifestBytes int64
	// ActionTimeout is how long one Helm action may wait for its hooks (and a test) to finish
	// (default DefaultActionTimeout, Helm's own --timeout).
	ActionTimeout time.Duration
	// RenderTimeout and RenderMemory bound one render of the chart (default
	// DefaultRenderTimeout and DefaultRenderMemory), which runs out of process (render.go).
	RenderTimeout time.Duration
	RenderMemory  int64
	// MaxLookups is the most lookups one render makes (default guard.DefaultMaxLookups; see
	// internal/guard, lookups.go).
	MaxLookups int
}

// The defaults of Limits.
const (
	// DefaultMaxObjects lets the biggest public charts through (a few hundred objects with
	// every option on) and refuses a count fed to `until` from values long before it fills a
	// namespace or a Service range.
	DefaultMaxObjects = 1000
	// DefaultMaxManifestBytes is four times what a release record (a Secret, at most 1 MiB
	// after gzip) holds of a typical manifest.
	DefaultMaxManifestBytes = 4 << 20
	// DefaultActionTimeout is Helm's --timeout.
	DefaultActionTimeout = 5 * time.Minute
)

// The names of the limits, as watches.yaml's limits field spells them (the one spelling of
// each: internal/watches/fields.go declares the limits with these).
const (
	LimitObjects       = "maxObjects"
	LimitManifestBytes = "maxManifestBytes"
	LimitActionTimeout = "actionTimeout"
)

func (l Limits) objects() int {
	if l.MaxObjects > 0 {
		return l.MaxObjects
	}
	return DefaultMaxObjects
}

func (l Limits) manifestBytes() int64 {
	if l.MaxManifestBytes > 0 {
		return l.MaxManifestBytes
	}
	return DefaultMaxManifestBytes
}

// Timeout is how long an action may wait.
func (l Limits) Timeout() time.Duration {
	if l.ActionTimeout > 0 {
		return l.ActionTimeout
	}
	return DefaultActionTimeout
}

// LimitError: a release exceeds one of its Limits; nothing of it was applied.
type LimitError struct {
	// Limit is the name of the limit (LimitObjects, …), Max its value.
	Limit string
	Max   string
	// What says what exceeded it.
	What string
}

func (e *LimitError) Error() string {
	return fmt.Sprintf("%s: the watch's limit %s is %s (limits.%s in watches.yaml)", e.What, e.Limit, e.Max, e.Limit)
}

func limitError(limit string, max int64, what string) *LimitError {
	return &LimitError{Limit: limit, Max: strconv.FormatInt(max, 10), What: what}
}

// checkSize holds a release's hooks to the limits, and its manifest to the object count
// (the post-renderer bounded its size before it parsed it): the check of every revision
// before it is stored.
func (l Limits) checkSize(rel *release.Release) error {
	n, size := countDocuments(rel.Manifest), int64(0)
	for _, h := range rel.Hooks {
		n += countDocuments(h.Manifest)
		size += int64(len(h.Manifest))
	}
	if size > l.manifestBytes() {
		return limitError(LimitManifestBytes, l.manifestBytes(), fmt.Sprintf("the release's hooks are %d bytes", size))
	}
	if n > l.objects() {
		return limitError(LimitObjects, int64(l.objects()), fmt.Sprintf("the release renders %d objects with its hooks", n))
	}
	return nil
}

// countDocuments counts the non-empty documents of a manifest as Helm and the post-renderer
// write them: each after a line "---" (or the start).
func countDocuments(manifest string) int {
	n := 0
	for doc := range bytes.SplitSeq([]byte(manifest), []byte("\n---")) {
		if len(bytes.TrimSpace(bytes.TrimPrefix(doc, []byte("---")))) > 0 {
			n++
		}
	}
	return n
}

func (l Limits) lookups() int {
	if l.MaxLookups > 0 {
		return l.MaxLookups
	}
	return guard.DefaultMaxLookups
}

// The defaults of the render limits.
const (
	DefaultRenderTimeout = 30 * time.Second
	DefaultRenderMemory  = 256 << 20
)

// The names of the render limits, as watches.yaml's limits field spells them.
const (
	LimitRenderTimeout = "renderTimeout"
	LimitRenderMemory  = "renderMemory"
)

func (l Limits) renderLimits() render.Limits {
	rl := render.Limits{Timeout: l.RenderTimeout, Memory: l.RenderMemory}
	if rl.Timeout <= 0 {
		rl.Timeout = DefaultRenderTimeout
	}
	if rl.Memory <= 0 {
		rl.Memory = DefaultRenderMemory
	}
	return rl
}
