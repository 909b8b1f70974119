package chartsource

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/fsnotify/fsnotify"
)

// NeedLeaderElection: every replica serves charts (reconcilers on a standby replica are idle,
// but the source is cheap and keeps the snapshot warm for a fail-over).
func (s *Source) NeedLeaderElection() bool { return false }

// Start runs the watcher and the rescan until ctx ends. It implements manager.Runnable.
func (s *Source) Start(ctx context.Context) error {
	var rescan <-chan time.Time
	if s.opts.Rescan > 0 {
		t := time.NewTicker(s.opts.Rescan)
		defer t.Stop()
		rescan = t.C
	}
	l := &loop{s: s, pending: map[string]time.Time{}, timer: time.NewTimer(time.Hour)}
	l.timer.Stop()
	if s.opts.Watch {
		if err := l.watch(); err != nil {
			return err
		}
		defer func() { l.w.close() }()
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case ev, ok := <-l.events:
			if !ok {
				l.events = nil
				continue
			}
			l.changed(ev.Name)
		case err, ok := <-l.errs:
			if !ok {
				l.errs = nil
				continue
			}
			// Overflow or a broken watch: start over with a fresh watcher and read everything.
			s.opts.Log.Error(err, "chart watcher failed; rebuilding it and rescanning")
			watcherRestarts.Inc()
			l.w.close()
			if err := l.watch(); err != nil {
				return err
			}
			l.reloadAll()
		case <-l.timer.C:
			l.reload()
		case <-rescan:
			l.reloadAll()
		}
	}
}

// loop is the state of Start: the watcher, and the charts whose files changed and are waiting
// for the quiet period to end.
type loop struct {
	s       *Source
	w       *watcher
	events  <-chan fsnotify.Event
	errs    <-chan error
	pending map[string]time.Time // chart → when the first unhandled event was seen
	timer   *time.Timer
}

func (l *loop) watch() error {
	w, err := newWatcher(l.s)
	if err != nil {
		return err
	}
	l.w, l.events, l.errs = w, w.fs.Events, w.fs.Errors
	return nil
}

// changed notes an event on a file; the quiet period restarts with every event.
func (l *loop) changed(name string) {
	for _, p := range l.s.chartsFor(name) {
		if _, seen := l.pending[p]; !seen {
			l.pending[p] = time.Now()
		}
	}
	if len(l.pending) > 0 {
		l.s.setPending(l.pending)
		l.timer.Reset(l.s.opts.Debounce)
	}
}

// reload reloads the pending charts once the quiet period is over.
func (l *loop) reload() {
	for p, seen := range l.pending {
		if changed, err := l.s.Reload(p); changed && err == nil {
			changeToSwapSeconds.WithLabelValues(p).Observe(time.Since(seen).Seconds())
		}
	}
	clear(l.pending)
	l.s.setPending(l.pending)
	l.sync()
}

// sync brings the watches up to the trees just read; the charts of a directory it began to
// watch are read once more, for what was written there between the read and the watch.
func (l *loop) sync() {
	if l.w == nil {
		return
	}
	for _, d := range l.w.sync() {
		l.changed(d)
	}
}

// reloadAll reloads every chart (a rescan, a rebuilt watcher) and syncs the watches.
func (l *loop) reloadAll() {
	for _, p := range l.s.Paths() {
		_, _ = l.s.Reload(p)
	}
	l.sync()
}

// chartsFor maps a changed file to the charts whose tree (or parent, where a ConfigMap's
// ..data swap happens) contains it.
func (s *Source) chartsFor(name string) []string {
	s.mu.RLock()
	defer s.mu.RUnlock()
	var out []string
	for p, e := range s.charts {
		if under(name, p) || under(name, filepath.Dir(p)) {
			out = append(out, p)
			continue
		}
		for _, d := range e.dirs {
			if under(name, d) {
				out = append(out, p)
				break
			}
		}
	}
	return out
}

func under(name, dir string) bool {
	return name == dir || strings.HasPrefix(name, dir+string(filepath.Separator))
}

// watchedDirs: every chart's parent (the ..data swap of a volume holding several charts), root,
// and the real directories of its tree.
func (s *Source) watchedDirs() map[string]bool {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := map[string]bool{}
	for p, e := range s.charts {
		out[filepath.Dir(p)] = true
		out[p] = true
		for _, d := range e.dirs {
			out[d] = true
		}
	}
	return out
}

// watcher wraps the one fsnotify watcher of the process. fsnotify is not recursive: sync adds
// every directory of every chart tree and drops the ones that went away. What is watched is
// fsnotify's own list: a directory removed and made anew at the same path (a checkout, a copy)
// lost its watch with its inode, and is watched again.
type watcher struct {
	s  *Source
	fs *fsnotify.Watcher
}

func newWatcher(s *Source) (*watcher, error) {
	fw, err := fsnotify.NewBufferedWatcher(256)
	if err != nil {
		return nil, fmt.Errorf("starting chart watcher: %w", err)
	}
	w := &watcher{s: s, fs: fw}
	w.sync()
	return w, nil
}

// sync watches what the charts' trees are now, and returns the directories it began to watch:
// what was written in them before the watch began sent no event.
func (w *watcher) sync() (added []string) {
	want := w.s.watchedDirs()
	watched := map[string]bool{}
	for _, d := range w.fs.WatchList() {
		watched[d] = true
	}
	for d := range want {
		if watched[d] {
			continue
		}
		if err := w.fs.Add(d); err != nil {
			if !errors.Is(err, os.ErrNotExist) {
				w.s.opts.Log.Error(err, "cannot watch chart directory; the periodic rescan still covers it", "dir", d)
			}
			continue
		}
		added = append(added, d)
	}
	for d := range watched {
		if !want[d] {
			_ = w.fs.Remove(d)
		}
	}
	w.s.syncs.Add(1)
	return added
}

func (w *watcher) close() { _ = w.fs.Close() }
