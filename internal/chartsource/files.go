package chartsource

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"

	"helm.sh/helm/v4/pkg/chart/loader/archive"
	"helm.sh/helm/v4/pkg/ignore"
)

// maxFiles bounds a chart tree, so that a chart root pointed at "/" fails instead of eating
// memory.
const (
	maxFiles     = 5000
	maxTotalSize = 64 << 20
)

// isAtomicWriterEntry reports names the kubelet's atomic writer uses inside ConfigMap and
// Secret volumes (..data, ..2026_11_29_10_00_00.123456789): copies, never chart files.
func isAtomicWriterEntry(name string) bool { return strings.HasPrefix(name, "..") }

// readTree reads a chart directory into Helm's buffered files, following symlinks (volumes are
// made of them), skipping atomic-writer entries and honouring .helmignore. It also returns
// every real directory it visited, for the watcher.
func readTree(root string) (files []*archive.BufferedFile, dirs []string, err error) {
	t := &tree{visited: map[string]bool{}}
	t.rules = ignore.Empty()
	if b, err := os.ReadFile(filepath.Join(root, ignore.HelmIgnore)); err == nil {
		if t.rules, err = ignore.Parse(bytes.NewReader(b)); err != nil {
			return nil, nil, fmt.Errorf("%s: %w", ignore.HelmIgnore, err)
		}
	}
	t.rules.AddDefaults()
	if err := t.walk(root, ""); err != nil {
		return nil, nil, err
	}
	sort.Slice(t.files, func(i, j int) bool { return t.files[i].Name < t.files[j].Name })
	return t.files, t.dirs, nil
}

// tree is what readTree has read so far.
type tree struct {
	rules   *ignore.Rules
	visited map[string]bool
	files   []*archive.BufferedFile
	dirs    []string
	total   int
}

func (t *tree) walk(dir, rel string) error {
	real, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return err
	}
	if t.visited[real] {
		return fmt.Errorf("%s: symlink loop", rel)
	}
	t.visited[real] = true
	t.dirs = append(t.dirs, real)
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if isAtomicWriterEntry(e.Name()) {
			continue
		}
		if err := t.entry(filepath.Join(dir, e.Name()), path.Join(rel, e.Name())); err != nil {
			return err
		}
	}
	return nil
}

func (t *tree) entry(full, relName string) error {
	fi, err := os.Stat(full) // follows symlinks
	if err != nil {
		if os.IsNotExist(err) { // dangling symlink mid-swap: the rescan sees the end state
			return nil
		}
		return err
	}
	switch {
	case t.rules.Ignore(relName, fi):
		return nil
	case fi.IsDir():
		return t.walk(full, relName)
	case !fi.Mode().IsRegular():
		return fmt.Errorf("%s: not a regular file", relName)
	case len(t.files) >= maxFiles:
		return fmt.Errorf("more than %d files", maxFiles)
	}
	data, err := os.ReadFile(full)
	if err != nil {
		return err
	}
	t.total += len(data)
	if t.total > maxTotalSize {
		return fmt.Errorf("chart larger than %d bytes", maxTotalSize)
	}
	t.files = append(t.files, &archive.BufferedFile{Name: relName, Data: bytes.TrimPrefix(data, []byte("\xef\xbb\xbf"))})
	return nil
}

// digest is a content hash of a chart's files: names and bytes, order-independent of the walk.
func digest(files []*archive.BufferedFile) string {
	h := sha256.New()
	for _, f := range files {
		fmt.Fprintf(h, "%s\x00%d\x00", f.Name, len(f.Data))
		h.Write(f.Data)
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil))
}

// materialize writes files into a fresh directory, for Helm's lint package, which reads charts
// from disk. The copy is exactly what was hashed: no race with further edits.
func materialize(files []*archive.BufferedFile, name string) (string, error) {
	tmp, err := os.MkdirTemp("", "rudder-lint-")
	if err != nil {
		return "", err
	}
	dir := filepath.Join(tmp, name)
	for _, f := range files {
		p := filepath.Join(dir, filepath.FromSlash(f.Name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			os.RemoveAll(tmp)
			return "", err
		}
		if err := os.WriteFile(p, f.Data, fs.FileMode(0o644)); err != nil {
			os.RemoveAll(tmp)
			return "", err
		}
	}
	return dir, nil
}

// Digest is the digest a Snapshot of the chart directory at root has (what the release
// records' rudder.dev/chart-digest label holds, before a watch's layers), read as the source
// reads it, without loading or linting the chart.
func Digest(root string) (string, error) {
	files, _, err := readTree(root)
	if err != nil {
		return "", err
	}
	return digest(files), nil
}
