package chartsource

import (
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"helm.sh/helm/v4/pkg/chart/loader/archive"
	chart "helm.sh/helm/v4/pkg/chart/v2"
	"helm.sh/helm/v4/pkg/chart/v2/lint/support"
	"helm.sh/helm/v4/pkg/chart/v2/loader"

	"github.com/rudder-operator/rudder/internal/records"
)

// Snapshot is one loaded, linted chart. It is immutable: never modify Chart.
type Snapshot struct {
	// Path is the chart directory as named in watches.yaml.
	Path string
	// Chart is the loaded chart. Shared between reconciles: read only.
	Chart *chart.Chart
	// Digest is a content hash of the chart's files ("sha256:…").
	Digest string

	files []*archive.BufferedFile
}

// Fresh is the chart for a Helm action. Helm changes the chart it is given only where it
// processes dependencies (it drops the disabled ones and imports values), and returns at once
// when Chart.yaml lists none (a nil list: an empty one is processed); so a chart with neither
// a dependency list nor subcharts is shared, read only, and every other chart is loaded again
// from its files, a private copy per action.
func (s *Snapshot) Fresh() (*chart.Chart, error) {
	if s.Chart.Metadata.Dependencies == nil && len(s.Chart.Dependencies()) == 0 {
		return s.Chart, nil
	}
	return loader.LoadFiles(s.files)
}

// Loaded is what the source knows of one chart: the snapshot in use and, when the files on disk
// are broken, why. A chart can be both served (Current) and failing (Err): the last good
// snapshot stays in use.
type Loaded struct {
	Current *Snapshot
	// Err is the last load/lint failure for FailedDigest; nil once a good version loads.
	Err          error
	FailedDigest string
}

// Options configure a Source.
type Options struct {
	// Debounce is how long the files must be quiet before a reload (default 1s).
	Debounce time.Duration
	// Rescan is the period of a full rescan that catches changes no event announced (NFS, FUSE,
	// subPath mounts, lost events). 0 disables it.
	Rescan time.Duration
	// Watch turns fsnotify on (the --chart-reload flag). Without it charts load once.
	Watch bool
	Log   logr.Logger
}

// Source owns a set of chart directories. Its methods are safe for concurrent use.
type Source struct {
	opts Options

	mu     sync.RWMutex
	charts map[string]*entry
	subs   []func(path string)

	// changed is signalled by the watcher; reload happens after Debounce of quiet.
	changed chan string
	// pending are the charts whose files changed and wait for the quiet period to end.
	pending map[string]bool
	// syncs counts the watcher's passes over the charts' directories (one when it starts, one
	// after each reload): what a directory that appeared is watched after.
	syncs atomic.Int64
}

type entry struct {
	path  string
	state Loaded
	dirs  []string // real directories of the tree at the last read
	// check are the values the chart is linted with on top of its defaults (see Add).
	check map[string]any
}

// New makes a Source; Add the charts, then Start it (or call Reload by hand in tests).
func New(opts Options) *Source {
	if opts.Debounce <= 0 {
		opts.Debounce = time.Second
	}
	return &Source{opts: opts, charts: map[string]*entry{}, changed: make(chan string, 1024), pending: map[string]bool{}}
}

// Debounce is the quiet time a change waits for before it is reloaded.
func (s *Source) Debounce() time.Duration { return s.opts.Debounce }

// Pending reports whether the files of the chart at path changed and wait for the quiet
// period to end: its reload, and the enqueue of its CRs, are coming.
func (s *Source) Pending(path string) bool {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.pending[path]
}

func (s *Source) setPending(paths map[string]time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	clear(s.pending)
	for p := range paths {
		s.pending[p] = true
	}
}

// Add loads a chart directory, linted (now and at every reload) with check on top of its
// defaults: the values every CR gives at least (nil: none). A chart that fails its first load
// is kept without a snapshot, and the error returned: its kind has nothing to serve until the
// chart loads (its CRs say why), while every other chart is served; a fix on disk is picked up
// as any edit is.
func (s *Source) Add(path string, check map[string]any) error {
	path = filepath.Clean(path)
	s.mu.Lock()
	if _, ok := s.charts[path]; ok {
		s.mu.Unlock()
		return nil
	}
	s.charts[path] = &entry{path: path, check: check}
	s.mu.Unlock()
	_, err := s.Reload(path)
	return err
}

// Get returns the state of a chart added before.
func (s *Source) Get(path string) (Loaded, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	e, ok := s.charts[filepath.Clean(path)]
	if !ok {
		return Loaded{}, false
	}
	return e.state, true
}

// Subscribe registers fn, called (from the source's goroutine) after a chart's state changed:
// a new snapshot was swapped in, or a load failed, or a failure cleared. fn must not block.
func (s *Source) Subscribe(fn func(path string)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.subs = append(s.subs, fn)
}

// Reload reads a chart now. It reports whether the state changed. An error means the files on
// disk do not make a valid chart; the last good snapshot stays in use.
func (s *Source) Reload(path string) (changed bool, err error) {
	path = filepath.Clean(path)
	s.mu.RLock()
	e, ok := s.charts[path]
	var prev Loaded
	var check map[string]any
	if ok {
		prev, check = e.state, e.check
	}
	s.mu.RUnlock()
	if !ok {
		return false, fmt.Errorf("chart %s was never added", path)
	}
	start := time.Now()
	files, dirs, rerr := readTree(path)
	var d string
	if rerr == nil {
		d = digest(files)
		if prev.Current != nil && d == prev.Current.Digest {
			// Unchanged content: maybe a broken edit was reverted.
			s.setDirs(path, dirs)
			if prev.Err == nil {
				return false, nil
			}
			s.swap(path, Loaded{Current: prev.Current}, dirs)
			reloadsTotal.WithLabelValues(path, "recovered").Inc()
			s.opts.Log.Info("chart recovered", "chart", path, "digest", records.DisplayDigest(prev.Current.Digest))
			return true, nil
		}
		if prev.Err != nil && prev.FailedDigest == d {
			s.setDirs(path, dirs)
			return false, prev.Err
		}
	}
	var snap *Snapshot
	if rerr == nil {
		snap, rerr = s.load(path, files, d, check)
	}
	if rerr != nil {
		rerr = fmt.Errorf("chart %s: %w", path, rerr)
		st := Loaded{Current: prev.Current, Err: rerr, FailedDigest: d}
		s.swap(path, st, dirs)
		reloadsTotal.WithLabelValues(path, "failed").Inc()
		s.opts.Log.Error(rerr, "chart rejected; keeping the last good version", "chart", path)
		return true, rerr
	}
	s.swap(path, Loaded{Current: snap}, dirs)
	reloadsTotal.WithLabelValues(path, "ok").Inc()
	chartInfo.DeletePartialMatch(map[string]string{"chart": path})
	chartInfo.WithLabelValues(path, snap.Chart.Metadata.Version, snap.Digest).Set(1)
	reloadSeconds.WithLabelValues(path).Observe(time.Since(start).Seconds())
	if prev.Current != nil {
		s.opts.Log.Info("chart reloaded", "chart", path, "version", snap.Chart.Metadata.Version,
			"digest", records.DisplayDigest(snap.Digest), "previousDigest", records.DisplayDigest(prev.Current.Digest))
	}
	return true, nil
}

// load lints the exact files read (from a private copy), with check on top of the chart's
// defaults, and loads them.
func (s *Source) load(path string, files []*archive.BufferedFile, d string, check map[string]any) (*Snapshot, error) {
	ch, err := loadFiles(files)
	if err != nil {
		return nil, err
	}
	var msgs []string
	for _, m := range lintFiles(ch, files, check) {
		if m.Severity >= support.ErrorSev {
			msgs = append(msgs, m.Error())
		}
	}
	if len(msgs) > 0 {
		return nil, fmt.Errorf("lint: %s", strings.Join(msgs, "; "))
	}
	return &Snapshot{Path: path, Chart: ch, Digest: d, files: files}, nil
}

func (s *Source) setDirs(path string, dirs []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if e, ok := s.charts[path]; ok && dirs != nil {
		e.dirs = dirs
	}
}

func (s *Source) swap(path string, st Loaded, dirs []string) {
	s.mu.Lock()
	e, ok := s.charts[path]
	if ok {
		e.state = st
		if dirs != nil {
			e.dirs = dirs
		}
	}
	subs := append([]func(string){}, s.subs...)
	s.mu.Unlock()
	for _, fn := range subs {
		fn(path)
	}
}

// Paths lists the charts added.
func (s *Source) Paths() []string {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := make([]string, 0, len(s.charts))
	for p := range s.charts {
		out = append(out, p)
	}
	return out
}
