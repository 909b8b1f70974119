package helm

import (
	"bytes"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/rudder-operator/rudder/internal/guard"

	"go.yaml.in/yaml/v2"
)

// rudder's writer writes what yaml.v2 writes, or leaves the object to it.
func TestAppendYAMLAsYAMLv2(t *testing.T) {
	t.Parallel()
	fast := 0
	for _, doc := range documents(t, awkwardManifest) {
		obj, err := guard.DecodeObject(doc)
		if err != nil {
			t.Fatal(err)
		}
		if sameAsYAMLv2(t, obj) {
			fast++
		}
	}
	// The bench chart's objects, as the post-renderer marks them, are written by rudder.
	out, err := benchRenderer().Run(bytes.NewBufferString(benchManifest))
	if err != nil {
		t.Fatal(err)
	}
	for _, doc := range documents(t, out.String()) {
		obj, err := guard.DecodeObject(doc)
		if err != nil {
			t.Fatal(err)
		}
		if !sameAsYAMLv2(t, obj) {
			t.Errorf("left to yaml.v2:\n%s", doc)
		}
	}
	if fast == 0 {
		t.Error("no object of the corpus was written by rudder")
	}
	// Random objects of awkward pieces.
	rnd := rand.New(rand.NewPCG(7, 11))
	n := 20000
	if testing.Short() {
		n = 3000
	}
	fast = 0
	for range n {
		if sameAsYAMLv2(t, randomObject(rnd, 0)) {
			fast++
		}
	}
	if fast < n/10 {
		t.Errorf("rudder wrote only %d of %d random objects", fast, n)
	}
}

// FuzzAppendYAML: go test -fuzz FuzzAppendYAML ./internal/helm/
func FuzzAppendYAML(f *testing.F) {
	for _, seed := range []uint64{1, 2, 3, 42} {
		f.Add(seed, seed*7)
	}
	f.Fuzz(func(t *testing.T, a, b uint64) {
		sameAsYAMLv2(t, randomObject(rand.New(rand.NewPCG(a, b)), 0))
	})
}

// sameAsYAMLv2 reports whether rudder's writer wrote obj, and fails when its bytes differ from
// yaml.v2's.
func sameAsYAMLv2(t *testing.T, obj map[string]any) bool {
	t.Helper()
	want, err := yaml.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	got, ok := appendYAML([]byte("prefix"), obj)
	if !ok {
		if string(got) != "prefix" {
			t.Fatalf("a refusal changed the buffer: %q", got)
		}
		return false
	}
	if !bytes.Equal(got, append([]byte("prefix"), want...)) {
		t.Fatalf("rudder wrote\n%s\nyaml.v2 writes\n%s", got[len("prefix"):], want)
	}
	return true
}

// Strings are made of pieces: common ones most of the time, and ones that sit on either side
// of what a plain scalar may be.
var (
	commonPieces = []string{"a", "b", "Z", "k10", "k9", "k09", "-", ".", "/", ":", " ", "0", "1", "01", "3", "f", "e", "T", "y",
		"true", "Gi", "m", "nginx:1.27", "app.kubernetes.io/name", "3f2a9c1e-8b7d-4e6f", "echo hello world", "x"}
	awkward = []string{"_", ": ", "  ", "#", " #", "0x", "0b", "0o", "E", "z", "yes", "no", "On", "NULL", "~", "'", "\"", "{",
		"}", "[", ",", "*", "&", "!", "|", ">", "%", "@", "`", "é", "\t", "\n", "2024-01-01", "1e3", "1_0", "12:30", ".inf", "=",
		"?", "\\", strings.Repeat("long ", 20), strings.Repeat("9", 20)}
)

func randomString(rnd *rand.Rand) string {
	var sb strings.Builder
	for range rnd.IntN(4) {
		if rnd.IntN(10) == 0 {
			sb.WriteString(awkward[rnd.IntN(len(awkward))])
		} else {
			sb.WriteString(commonPieces[rnd.IntN(len(commonPieces))])
		}
	}
	return sb.String()
}

func randomValue(rnd *rand.Rand, depth int) any {
	switch k := rnd.IntN(12); {
	case k < 2 && depth < 4:
		return randomObject(rnd, depth+1)
	case k < 4 && depth < 4:
		l := make([]any, rnd.IntN(4))
		for i := range l {
			l[i] = randomValue(rnd, depth+1)
		}
		return l
	case k < 8:
		return randomString(rnd)
	case k == 8:
		return rnd.Int64N(1<<40) - 1<<39
	case k == 9:
		return rnd.Float64()*1000 - 500
	case k == 10:
		return rnd.IntN(2) == 0
	}
	return nil
}

func randomObject(rnd *rand.Rand, depth int) map[string]any {
	m := map[string]any{}
	for range rnd.IntN(5) {
		m[randomString(rnd)] = randomValue(rnd, depth)
	}
	return m
}
