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

	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/ignore"
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
func readTree(root string) (files []*loader.BufferedFile, dirs []string, err error) {
	rules := ignore.Empty()
	if b, err := os.ReadFile(filepath.Join(root, ignore.HelmIgnore)); err == nil {
		if rules, err = ignore.Parse(bytes.NewReader(b)); err != nil {
			return nil, nil, fmt.Errorf("%s: %w", ignore.HelmIgnore, err)
		}
	}
	rules.AddDefaults()

	visited := map[string]bool{}
	total := 0
	var walk func(dir, rel string) error
	walk = func(dir, rel string) error {
		real, err := filepath.EvalSymlinks(dir)
		if err != nil {
			return err
		}
		if visited[real] {
			return fmt.Errorf("%s: symlink loop", rel)
		}
		visited[real] = true
		dirs = append(dirs, real)
		entries, err := os.ReadDir(dir)
		if err != nil {
			return err
		}
		for _, e := range entries {
			name := e.Name()
			if isAtomicWriterEntry(name) {
				continue
			}
			full := filepath.Join(dir, name)
			relName := path.Join(rel, name)
			fi, err := os.Stat(full) // follows symlinks
			if err != nil {
				if os.IsNotExist(err) { // dangling symlink mid-swap: the rescan sees the end state
					continue
				}
				return err
			}
			if rules.Ignore(relName, fi) {
				continue
			}
			if fi.IsDir() {
				if err := walk(full, relName); err != nil {
					return err
				}
				continue
			}
			if !fi.Mode().IsRegular() {
				return fmt.Errorf("%s: not a regular file", relName)
			}
			if len(files) >= maxFiles {
				return fmt.Errorf("more than %d files", maxFiles)
			}
			data, err := os.ReadFile(full)
			if err != nil {
				return err
			}
			total += len(data)
			if total > maxTotalSize {
				return fmt.Errorf("chart larger than %d bytes", maxTotalSize)
			}
			files = append(files, &loader.BufferedFile{Name: relName, Data: bytes.TrimPrefix(data, []byte("\xef\xbb\xbf"))})
		}
		return nil
	}
	if err := walk(root, ""); err != nil {
		return nil, nil, err
	}
	sort.Slice(files, func(i, j int) bool { return files[i].Name < files[j].Name })
	return files, dirs, nil
}

// digest is a content hash of a chart's files: names and bytes, order-independent of the walk.
func digest(files []*loader.BufferedFile) string {
	h := sha256.New()
	for _, f := range files {
		fmt.Fprintf(h, "%s\x00%d\x00", f.Name, len(f.Data))
		h.Write(f.Data)
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil))
}

// materialize writes files into a fresh directory, for Helm's lint package, which reads charts
// from disk. The copy is exactly what was hashed: no race with further edits.
func materialize(files []*loader.BufferedFile, name string) (string, error) {
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
