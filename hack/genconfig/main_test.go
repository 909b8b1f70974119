package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCommittedFilesCurrent fails when charts/ or watches.yaml changed without `make manifests`.
func TestCommittedFilesCurrent(t *testing.T) {
	root := filepath.Join("..", "..")
	files, err := Generate(root)
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range files {
		got, err := os.ReadFile(filepath.Join(root, name))
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != string(want) {
			t.Errorf("%s is out of date: run make manifests", name)
		}
	}
}

func TestChartFiles(t *testing.T) {
	dir := t.TempDir()
	write := func(p, s string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, p)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, p), []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("b/Chart.yaml", "name: b")
	write("b/templates/_helpers.tpl", "")
	write("a/Chart.yaml", "name: a")
	write("a/templates/x/y.yaml", "")
	write("testdata/z.golden.yaml", "") // no Chart.yaml: not a chart
	write("charts_test.go", "")
	got, err := ChartFiles(dir)
	if err != nil {
		t.Fatal(err)
	}
	var s []string
	for _, f := range got {
		s = append(s, f.Key+"="+f.Path)
	}
	want := "a__Chart.yaml=a/Chart.yaml a__templates__x__y.yaml=a/templates/x/y.yaml b__Chart.yaml=b/Chart.yaml b__templates___helpers.tpl=b/templates/_helpers.tpl"
	if strings.Join(s, " ") != want {
		t.Fatalf("got  %s\nwant %s", strings.Join(s, " "), want)
	}

	write("a/templates/bad__name.yaml", "")
	if _, err := ChartFiles(dir); err == nil || !strings.Contains(err.Error(), "bad__name.yaml") {
		t.Fatalf("a path with __ must be refused, got %v", err)
	}
}

func TestChartsTooBigForAConfigMap(t *testing.T) {
	small := []ChartFile{{Path: "a/Chart.yaml", Size: 100}, {Path: "a/values.yaml", Size: 200}}
	if err := fitsConfigMap(small); err != nil {
		t.Fatal(err)
	}
	big := append(small, ChartFile{Path: "a/files/blob", Size: 1 << 20})
	if err := fitsConfigMap(big); err == nil || !strings.Contains(err.Error(), "config/pvc") {
		t.Fatalf("got %v, want a pointer to config/pvc", err)
	}
}
