package docrefs

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// The user's documentation: README.md and docs/. Its links between its files must land on a file
// and, when they name one, on a heading of it.

var (
	// link is a Markdown link's target: [text](target).
	link = regexp.MustCompile(`\]\(([^)\s]+)\)`)
	// heading is a Markdown heading outside code.
	heading = regexp.MustCompile(`(?m)^#{1,6} +(.+?) *$`)
	// fence opens or closes a code block.
	fence = regexp.MustCompile("(?m)^ *```")
)

// maxReadmeLines bounds README.md: what rudder is, the two commands, the tour, deploying and the
// links fit on a few screens; the rest belongs in docs/.
const maxReadmeLines = 250

func TestDocsLinksLand(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	files = append(files, filepath.Join(root, "README.md"))
	if len(files) < 5 {
		t.Fatalf("%d documents read: the test no longer finds docs/", len(files))
	}
	anchors := map[string]map[string]bool{} // file (cleaned path) → its headings' anchors
	texts := map[string]string{}
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		f = filepath.Clean(f)
		if n := strings.Count(string(raw), "\n"); filepath.Base(f) == "README.md" && n > maxReadmeLines {
			t.Errorf("README.md has %d lines, more than %d: move reference into docs/", n, maxReadmeLines)
		}
		texts[f] = outsideCode(string(raw))
		anchors[f] = headingAnchors(texts[f])
	}
	links := 0
	for f, text := range texts {
		for _, m := range link.FindAllStringSubmatch(text, -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			links++
			path, frag, _ := strings.Cut(target, "#")
			dest := f
			if path != "" {
				dest = filepath.Clean(filepath.Join(filepath.Dir(f), path))
			}
			rel, _ := filepath.Rel(root, f)
			if _, err := os.Stat(dest); err != nil {
				t.Errorf("%s: links to %s, which does not exist", rel, target)
				continue
			}
			if frag == "" {
				continue
			}
			if a, ok := anchors[dest]; !ok || !a[frag] {
				t.Errorf("%s: links to %s, whose heading #%s does not exist", rel, target, frag)
			}
		}
	}
	if links < 20 {
		t.Fatalf("%d links read: the test no longer reads them", links)
	}
}

// outsideCode is text without its fenced code blocks.
func outsideCode(text string) string {
	var b strings.Builder
	in := false
	for _, line := range strings.SplitAfter(text, "\n") {
		if fence.MatchString(line) {
			in = !in
			continue
		}
		if !in {
			b.WriteString(line)
		}
	}
	return b.String()
}

// headingAnchors is the anchors GitHub gives text's headings: lower case, spaces as "-",
// punctuation other than "-" and "_" dropped, a repeated one suffixed "-1", "-2", ….
func headingAnchors(text string) map[string]bool {
	out := map[string]bool{}
	seen := map[string]int{}
	for _, m := range heading.FindAllStringSubmatch(text, -1) {
		a := anchorOf(m[1])
		if n := seen[a]; n > 0 {
			out[a+"-"+strconv.Itoa(n)] = true
		} else {
			out[a] = true
		}
		seen[a]++
	}
	return out
}

func anchorOf(title string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(title) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r > 127:
			b.WriteRune(r)
		}
	}
	return b.String()
}
