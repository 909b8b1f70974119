// Package chartsourcetest lays out chart volumes for tests the way the kubelet does. It is
// imported by tests only.
package chartsourcetest

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
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

// ArchiveBomb is a chart archive (.tgz) of a chart named name whose one other file inflates to
// size bytes of zeros (a whole number of mebibytes), in about a kilobyte per mebibyte: the gzip
// stream is one member per mebibyte, which gzip readers read as one stream.
func ArchiveBomb(name string, size int64) ([]byte, error) {
	const mib = 1 << 20
	if size%mib != 0 {
		return nil, fmt.Errorf("size %d is not a whole number of mebibytes", size)
	}
	chart := []byte("apiVersion: v2\nname: " + name + "\nversion: 0.1.0\n")
	var head bytes.Buffer
	tw := tar.NewWriter(&head)
	if err := tw.WriteHeader(&tar.Header{Name: name + "/Chart.yaml", Mode: 0o644, Size: int64(len(chart))}); err != nil {
		return nil, err
	}
	if _, err := tw.Write(chart); err != nil {
		return nil, err
	}
	// The header of the zeros goes out as it is written; the zeros themselves are the members
	// below, never written through tw (whose Close would want them).
	if err := tw.WriteHeader(&tar.Header{Name: name + "/files/zeros", Mode: 0o644, Size: size}); err != nil {
		return nil, err
	}
	var out, block bytes.Buffer
	if err := gzipMember(&out, head.Bytes()); err != nil {
		return nil, err
	}
	if err := gzipMember(&block, make([]byte, mib)); err != nil {
		return nil, err
	}
	for range size / mib {
		out.Write(block.Bytes())
	}
	// The end of the archive: two zero blocks (the file needs no padding: it is whole blocks).
	if err := gzipMember(&out, make([]byte, 1024)); err != nil {
		return nil, err
	}
	return out.Bytes(), nil
}

func gzipMember(w *bytes.Buffer, data []byte) error {
	zw, err := gzip.NewWriterLevel(w, gzip.BestCompression)
	if err != nil {
		return err
	}
	if _, err := zw.Write(data); err != nil {
		return err
	}
	return zw.Close()
}
