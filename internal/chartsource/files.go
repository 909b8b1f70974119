package chartsource

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"syscall"

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

// systemTrees are the kernel's trees: a chart that reaches into them reads rudder's own
// process (its environment, its memory), devices or kernel state, never a chart file.
var systemTrees = []string{"/proc", "/sys", "/dev"}

// readTree reads a chart directory into Helm's buffered files, skipping atomic-writer entries
// and honouring .helmignore. It also returns every real directory it visited, for the watcher.
//
// What a chart is, is the files inside its own directory: the root is resolved once (a git-sync
// link or a volume's mount path), and a symlink in the tree is followed only when what it
// resolves to lies inside that resolved root (the kubelet's ..data links, links within a
// repository). Any other link refuses the whole tree, naming the file and where it points. The
// check gives the message; the reads themselves go through an os.Root of the resolved root, so
// a link swapped after the check cannot lead a read outside it either.
func readTree(root string) (files []*archive.BufferedFile, dirs []string, err error) {
	return readTreeWith(root, nil)
}

// readTreeWith is readTree with resolved called between each file's check and its read.
func readTreeWith(root string, resolved func(relName string)) (files []*archive.BufferedFile, dirs []string, err error) {
	// A path that resolved a moment ago and is gone now is a tree changing under the read (a
	// volume's atomic swap removes the directory its links pointed into): it is read again, as
	// it is now, a few times before the change is taken for the error it says.
	for range treeReads - 1 {
		files, dirs, err = readTreeOnce(root, resolved)
		if !errors.Is(err, fs.ErrNotExist) {
			return files, dirs, err
		}
	}
	return readTreeOnce(root, resolved)
}

// treeReads is how often a tree that changes under its read is read.
const treeReads = 3

func readTreeOnce(root string, resolved func(relName string)) (files []*archive.BufferedFile, dirs []string, err error) {
	real, err := filepath.EvalSymlinks(root)
	if err != nil {
		return nil, nil, err
	}
	if real, err = filepath.Abs(real); err != nil {
		return nil, nil, err
	}
	if sys := systemTree(real); sys != "" {
		return nil, nil, fmt.Errorf("the chart directory %s lies in %s, which holds no charts", root, sys)
	}
	r, err := os.OpenRoot(real)
	if err != nil {
		return nil, nil, err
	}
	defer r.Close()
	t := &tree{root: r, real: real, resolved: resolved, walking: map[string]bool{}, seen: map[string]bool{}}
	t.rules = ignore.Empty()
	if b, err := t.readIgnore(); err != nil {
		return nil, nil, err
	} else if b != nil {
		if t.rules, err = ignore.Parse(bytes.NewReader(b)); err != nil {
			return nil, nil, fmt.Errorf("%s: %w", ignore.HelmIgnore, err)
		}
	}
	t.rules.AddDefaults()
	if err := t.walk(".", ""); err != nil {
		return nil, nil, err
	}
	sort.Slice(t.files, func(i, j int) bool { return t.files[i].Name < t.files[j].Name })
	return t.files, t.dirs, nil
}

// systemTree is the kernel tree path lies in, or "".
func systemTree(path string) string {
	for _, sys := range systemTrees {
		if path == sys || strings.HasPrefix(path, sys+string(filepath.Separator)) {
			return sys
		}
	}
	return ""
}

// tree is what readTree has read so far.
type tree struct {
	root *os.Root // the chart's resolved directory: every read goes through it
	real string   // its path
	// resolved, when set, is called between an entry's check and its read (tests swap a link
	// there).
	resolved func(relName string)

	rules *ignore.Rules
	// walking are the directories being walked (a link to one of them is a loop), seen every
	// directory walked; both below the root, links resolved.
	walking, seen map[string]bool
	files         []*archive.BufferedFile
	dirs          []string
	total         int
}

// readIgnore is the chart's .helmignore (nil when it has none), read as any chart file is.
func (t *tree) readIgnore() ([]byte, error) {
	inside, fi, err := t.resolve(ignore.HelmIgnore, ignore.HelmIgnore)
	if err != nil || fi == nil {
		return nil, err
	}
	return t.read(ignore.HelmIgnore, inside)
}

// resolve is where the entry relName (its path in the chart) at onDisk (its path below the
// root as walked) leads: its path below the root with every link resolved, and what is there;
// a nil FileInfo when nothing is (a link dangling mid-swap: the rescan sees the end state). A
// link that leads out of the chart, or a loop of links, is an error that names it.
func (t *tree) resolve(relName, onDisk string) (string, os.FileInfo, error) {
	full := filepath.Join(t.real, onDisk)
	real, err := filepath.EvalSymlinks(full)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return "", nil, nil
	case err != nil:
		return "", nil, fmt.Errorf("%s: %w", relName, err)
	}
	inside, err := filepath.Rel(t.real, real)
	if err != nil || inside == ".." || strings.HasPrefix(inside, ".."+string(filepath.Separator)) {
		where := "outside the chart's directory " + t.real
		if sys := systemTree(real); sys != "" {
			where = "into " + sys
		}
		return "", nil, fmt.Errorf("%s is a symlink to %s, %s: a chart is the files inside its own directory", relName, real, where)
	}
	fi, err := t.root.Stat(inside)
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil, nil
	}
	if err != nil {
		return "", nil, fmt.Errorf("%s: %w", relName, err)
	}
	return inside, fi, nil
}

// walk reads the directory at onDisk (below the root, links resolved) as the chart's rel.
func (t *tree) walk(onDisk, rel string) error {
	if t.walking[onDisk] {
		return fmt.Errorf("%s: symlink loop", rel)
	}
	t.walking[onDisk] = true
	defer delete(t.walking, onDisk)
	if !t.seen[onDisk] {
		t.seen[onDisk] = true
		t.dirs = append(t.dirs, filepath.Join(t.real, onDisk))
	}
	d, err := t.root.Open(onDisk)
	if err != nil {
		return err
	}
	entries, err := d.ReadDir(-1)
	d.Close()
	if err != nil {
		return err
	}
	sort.Slice(entries, func(i, j int) bool { return entries[i].Name() < entries[j].Name() })
	for _, e := range entries {
		if isAtomicWriterEntry(e.Name()) {
			continue
		}
		if err := t.entry(filepath.Join(onDisk, e.Name()), path.Join(rel, e.Name())); err != nil {
			return err
		}
	}
	return nil
}

func (t *tree) entry(onDisk, relName string) error {
	inside, fi, err := t.resolve(relName, onDisk)
	switch {
	case err != nil:
		return err
	case fi == nil:
		return nil
	case t.rules.Ignore(relName, fi):
		return nil
	case fi.IsDir():
		return t.walk(inside, relName)
	case !fi.Mode().IsRegular():
		return fmt.Errorf("%s: not a regular file", relName)
	case len(t.files) >= maxFiles:
		return fmt.Errorf("more than %d files", maxFiles)
	}
	data, err := t.read(relName, inside)
	if err != nil {
		return err
	}
	t.files = append(t.files, &archive.BufferedFile{Name: relName, Data: bytes.TrimPrefix(data, []byte("\xef\xbb\xbf"))})
	return nil
}

// read reads the regular file at inside (below the root), within what the tree may still
// hold. It opens before it checks (no FIFO blocks it, no swap between a stat and the open
// changes what is read) and reads through the root, so that nothing outside it is read
// whatever the link became since it was resolved.
func (t *tree) read(relName, inside string) ([]byte, error) {
	if t.resolved != nil {
		t.resolved(relName)
	}
	f, err := t.root.OpenFile(inside, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", relName, err)
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil {
		return nil, fmt.Errorf("%s: %w", relName, err)
	} else if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s: not a regular file", relName)
	}
	data, err := io.ReadAll(io.LimitReader(f, int64(maxTotalSize-t.total)+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", relName, err)
	}
	t.total += len(data)
	if t.total > maxTotalSize {
		return nil, fmt.Errorf("chart larger than %d bytes", maxTotalSize)
	}
	return data, nil
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
