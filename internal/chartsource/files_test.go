package chartsource

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/rudder-operator/rudder/internal/chartsource/chartsourcetest"
)

// names is the chart files a read returned, by name, with their content.
func names(t *testing.T, root string) map[string]string {
	t.Helper()
	files, _, err := readTree(root)
	if err != nil {
		t.Fatalf("read %s: %v", root, err)
	}
	out := map[string]string{}
	for _, f := range files {
		out[f.Name] = string(f.Data)
	}
	return out
}

func symlink(t *testing.T, target, link string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(link), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
}

// refused asserts that the tree at root is refused with an error that says each of want.
func refused(t *testing.T, root string, want ...string) {
	t.Helper()
	files, _, err := readTree(root)
	if err == nil {
		t.Fatalf("read %s: no error, %d files", root, len(files))
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q does not say %q", err, w)
		}
	}
	if _, err := Load(root); err == nil {
		t.Errorf("Load(%s): no error", root)
	}
}

func TestTreeKubeletVolumeLoads(t *testing.T) {
	vol := filepath.Join(t.TempDir(), "demo")
	publish(t, vol, map[string]string{"Chart.yaml": chartYAML, "templates/cm.yaml": cm("one"), "files/a.txt": "a"})
	got := names(t, vol)
	if len(got) != 3 || got["files/a.txt"] != "a" {
		t.Fatalf("read %v, want Chart.yaml, templates/cm.yaml and files/a.txt through ..data", got)
	}
}

// A git-sync checkout: the chart's path goes through the link git-sync swaps (repo ->
// .worktrees/<hash>), and the repository links within itself, relatively and absolutely.
func TestTreeGitSyncWorktreeLoads(t *testing.T) {
	base := t.TempDir()
	wt := filepath.Join(base, ".worktrees", "0f3c9a")
	chartDir := filepath.Join(wt, "charts", "demo")
	write(t, filepath.Join(chartDir, "Chart.yaml"), chartYAML)
	write(t, filepath.Join(chartDir, "shared", "cm.yaml"), cm("shared"))
	write(t, filepath.Join(chartDir, "files", "real.txt"), "real")
	symlink(t, "../shared/cm.yaml", filepath.Join(chartDir, "templates", "cm.yaml"))
	symlink(t, filepath.Join(chartDir, "files", "real.txt"), filepath.Join(chartDir, "files", "abs.txt"))
	symlink(t, "files", filepath.Join(chartDir, "more"))
	symlink(t, filepath.Join(".worktrees", "0f3c9a"), filepath.Join(base, "repo"))
	got := names(t, filepath.Join(base, "repo", "charts", "demo"))
	want := map[string]string{"templates/cm.yaml": cm("shared"), "files/abs.txt": "real", "more/real.txt": "real", "more/abs.txt": "real"}
	for name, content := range want {
		if got[name] != content {
			t.Errorf("%s = %q, want %q", name, got[name], content)
		}
	}
}

func TestTreeRefusesLinksOut(t *testing.T) {
	outside := t.TempDir()
	creds := filepath.Join(outside, "kubeconfig")
	write(t, creds, "token: admin-secret\n")
	cases := []struct {
		name string
		// lay adds the link to a chart at dir.
		lay  func(dir string)
		want []string
	}{
		{"a file to an absolute path", func(dir string) { symlink(t, creds, filepath.Join(dir, "files", "creds")) },
			[]string{"files/creds is a symlink to " + creds, "outside the chart's directory"}},
		{"a directory to an absolute path", func(dir string) { symlink(t, outside, filepath.Join(dir, "files")) },
			[]string{"files is a symlink to " + outside, "outside the chart's directory"}},
		{"a relative link that climbs out", func(dir string) {
			rel, err := filepath.Rel(filepath.Join(dir, "files"), creds)
			if err != nil {
				t.Fatal(err)
			}
			symlink(t, rel, filepath.Join(dir, "files", "creds"))
		}, []string{"files/creds is a symlink to " + creds}},
		{"a file into /proc", func(dir string) { symlink(t, "/proc/self/environ", filepath.Join(dir, "files", "env")) },
			[]string{"files/env is a symlink to /proc/", "into /proc"}},
		{"a file into /dev", func(dir string) { symlink(t, "/dev/zero", filepath.Join(dir, "files", "zero")) },
			[]string{"files/zero is a symlink to /dev/zero", "into /dev"}},
		{".helmignore out", func(dir string) { symlink(t, creds, filepath.Join(dir, ".helmignore")) },
			[]string{".helmignore is a symlink to " + creds}},
		{"a loop of links", func(dir string) {
			symlink(t, "b", filepath.Join(dir, "files", "a"))
			symlink(t, "a", filepath.Join(dir, "files", "b"))
		}, []string{"files/a", "too many links"}},
		{"a directory that links to its parent", func(dir string) { symlink(t, "..", filepath.Join(dir, "templates", "again")) },
			[]string{"templates/again: symlink loop"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := plainChart(t)
			c.lay(dir)
			refused(t, dir, c.want...)
		})
	}
}

func TestTreeRefusesSpecialFiles(t *testing.T) {
	dir := plainChart(t)
	if err := syscall.Mkfifo(filepath.Join(dir, "files", "pipe"), 0o644); err != nil {
		if err := os.MkdirAll(filepath.Join(dir, "files"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := syscall.Mkfifo(filepath.Join(dir, "files", "pipe"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	refused(t, dir, "files/pipe: not a regular file")
	if _, _, err := readTree("/proc/self"); err == nil || !strings.Contains(err.Error(), "lies in /proc") {
		t.Fatalf("a chart directory in /proc: %v", err)
	}
}

// A link swapped after its check, to a file outside the chart: the read goes through the
// chart's root, which refuses to leave it.
func TestTreeLinkSwappedMidReadIsRefused(t *testing.T) {
	outside := filepath.Join(t.TempDir(), "creds")
	write(t, outside, "token: admin-secret\n")
	dir := plainChart(t)
	write(t, filepath.Join(dir, "files", "real.txt"), "real")
	symlink(t, "real.txt", filepath.Join(dir, "files", "link"))
	swapped := false
	files, _, err := readTreeWith(dir, func(rel string) {
		if rel != "files/link" || swapped {
			return
		}
		swapped = true
		// The check resolved files/link to files/real.txt; now that path itself becomes a link out.
		if err := os.Remove(filepath.Join(dir, "files", "real.txt")); err != nil {
			t.Fatal(err)
		}
		symlink(t, outside, filepath.Join(dir, "files", "real.txt"))
	})
	if !swapped {
		t.Fatal("the read never reached files/link")
	}
	for _, f := range files {
		if strings.Contains(string(f.Data), "admin-secret") {
			t.Fatalf("%s read the file outside the chart", f.Name)
		}
	}
	if err == nil || !strings.Contains(err.Error(), "files/link") {
		t.Fatalf("the swapped read: %v, want an error naming files/link", err)
	}
}

func TestTreeDanglingLinkIsSkipped(t *testing.T) {
	dir := plainChart(t)
	symlink(t, "gone.yaml", filepath.Join(dir, "templates", "mid-swap.yaml"))
	if got := names(t, dir); len(got) != 3 {
		t.Fatalf("read %v, want the three real files", got)
	}
}

// A subchart archive that inflates to 2 GiB is refused at Helm's bound on a chart's inflated
// size, from a file well within the tree's bounds.
func TestTreeArchiveBombIsBounded(t *testing.T) {
	// The same archive, small, is a subchart: the bound is what refuses the big one.
	small, err := chartsourcetest.ArchiveBomb("bomb", 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	dir := plainChart(t)
	write(t, filepath.Join(dir, "charts", "bomb-0.1.0.tgz"), string(small))
	if ch, err := Load(dir); err != nil || len(ch.Dependencies()) != 1 || len(ch.Dependencies()[0].Files[0].Data) != 1<<20 {
		t.Fatalf("the small archive: %v", err)
	}
	bomb, err := chartsourcetest.ArchiveBomb("bomb", 2<<30)
	if err != nil {
		t.Fatal(err)
	}
	if len(bomb) > maxTotalSize/8 {
		t.Fatalf("the archive is %d bytes: not a bomb", len(bomb))
	}
	write(t, filepath.Join(dir, "charts", "bomb-0.1.0.tgz"), string(bomb))
	_, err = Load(dir)
	if err == nil || !strings.Contains(err.Error(), "decompressed chart is larger than the maximum size") {
		t.Fatalf("Load: %v, want Helm's bound on the inflated size", err)
	}
}

// A ConfigMap volume swapped while it is read (the kubelet removes the directory the links
// pointed into): the tree is read again, as it is now, not refused.
func TestTreeVolumeSwappedMidReadIsReadAgain(t *testing.T) {
	vol := filepath.Join(t.TempDir(), "demo")
	publish(t, vol, map[string]string{"Chart.yaml": chartYAML, "templates/cm.yaml": cm("one")})
	swapped := false
	files, _, err := readTreeWith(vol, func(rel string) {
		if swapped || rel != "templates/cm.yaml" {
			return
		}
		swapped = true
		publish(t, vol, map[string]string{"Chart.yaml": chartYAML, "templates/cm.yaml": cm("two")})
	})
	if err != nil || !swapped {
		t.Fatalf("the read across the swap: %v (swapped: %v)", err, swapped)
	}
	for _, f := range files {
		if f.Name == "templates/cm.yaml" && string(f.Data) != cm("two") {
			t.Fatalf("templates/cm.yaml = %q, want the swapped-in version", f.Data)
		}
	}
}
