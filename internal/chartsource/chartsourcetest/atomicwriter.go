// Package chartsourcetest lays out chart volumes for tests the way the kubelet does. It is
// imported by tests only.
package chartsourcetest

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
)

var generation atomic.Int64

// PublishAtomic writes files (slash-separated paths → content) into the volume directory vol as
// the kubelet's atomic writer updates a ConfigMap volume with items paths: the files go to a new
// timestamped directory, a ..data_tmp symlink to it is renamed over ..data (the atomic step),
// every top-level entry is a symlink through ..data, and the previous directory is removed.
func PublishAtomic(vol string, files map[string]string) error {
	ts := fmt.Sprintf("..2026_11_29_10_00_00.%09d", generation.Add(1))
	tops := map[string]bool{}
	for name, content := range files {
		p := filepath.Join(vol, ts, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			return err
		}
		tops[strings.SplitN(name, "/", 2)[0]] = true
	}
	old, _ := os.Readlink(filepath.Join(vol, "..data"))
	tmp := filepath.Join(vol, "..data_tmp")
	if err := os.Symlink(ts, tmp); err != nil {
		return err
	}
	if err := os.Rename(tmp, filepath.Join(vol, "..data")); err != nil {
		return err
	}
	for top := range tops {
		link := filepath.Join(vol, top)
		if _, err := os.Lstat(link); os.IsNotExist(err) {
			if err := os.Symlink(filepath.Join("..data", top), link); err != nil {
				return err
			}
		}
	}
	if old != "" {
		return os.RemoveAll(filepath.Join(vol, old))
	}
	return nil
}

// ReadDir reads every file under dir into the map PublishAtomic takes.
func ReadDir(dir string) (map[string]string, error) {
	files := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		files[filepath.ToSlash(rel)] = string(b)
		return err
	})
	return files, err
}
