package records

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
)

// What this process wrote of a release's records is read in place of a cache that does not
// show it yet (a new revision, new labels on a revision, a revision deleted), and dropped once
// the cache shows that version or a newer one.
func TestWrittenIsReadUntilTheCacheShowsIt(t *testing.T) {
	t.Parallel()
	rec := func(name, rv string, labels map[string]string) metav1.PartialObjectMetadata {
		return metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: name, ResourceVersion: rv, Labels: labels}}
	}
	v1 := map[string]string{"name": "web", "owner": "helm", "version": "1", "status": "superseded"}
	v2 := map[string]string{"name": "web", "owner": "helm", "version": "2", "status": "deployed"}
	v2tested := map[string]string{"name": "web", "owner": "helm", "version": "2", "status": "deployed", LabelTestedRevision: "2"}
	w := NewWritten()
	cached := []metav1.PartialObjectMetadata{rec("sh.helm.release.v1.web.v1", "10", v1)}
	w.wrote(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "sh.helm.release.v1.web.v2", ResourceVersion: "12", Labels: v2}}, "n")
	w.wrote(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "other", ResourceVersion: "13", Labels: map[string]string{"name": "other"}}}, "n")
	if got := w.overlay("n", "web", cached); len(got) != 2 || got[1]["version"] != "2" {
		t.Fatalf("a revision the cache does not show yet: %v", got)
	}
	if h := NewestHead(headsOf(w.overlay("n", "web", cached))); h == nil || h.Revision != 2 {
		t.Fatalf("newest: %+v", h)
	}
	// The cache shows revision 2; the test run's labels are written after.
	cached = append(cached, rec("sh.helm.release.v1.web.v2", "12", v2))
	w.wrote(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "sh.helm.release.v1.web.v2", ResourceVersion: "14", Labels: v2tested}}, "n")
	if got := w.overlay("n", "web", cached); len(got) != 2 || got[1][LabelTestedRevision] != "2" {
		t.Fatalf("labels the cache does not show yet: %v", got)
	}
	// The cache catches up: its view is read, and the write is dropped.
	cached[1] = rec("sh.helm.release.v1.web.v2", "15", v2)
	if got := w.overlay("n", "web", cached); got[1][LabelTestedRevision] != "" {
		t.Fatalf("the cache's newer version: %v", got)
	}
	if len(w.releases.Keys()) != 1 { // the other release's write stays
		t.Fatalf("kept %v after the cache caught up", w.releases.Keys())
	}
	// A revision deleted while the cache still shows it.
	w.wrote(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "sh.helm.release.v1.web.v1", ResourceVersion: "16", Labels: v1}}, "n")
	w.deleted("n", "sh.helm.release.v1.web.v1")
	if got := w.overlay("n", "web", cached); len(got) != 1 || got[0]["version"] != "2" {
		t.Fatalf("a deleted revision: %v", got)
	}
	if got := w.overlay("m", "web", cached); len(got) != 2 {
		t.Fatalf("another namespace's release of the same name: %v", got)
	}
}

func headsOf(ls []map[string]string) []*Head {
	var out []*Head
	for _, l := range ls {
		if h := HeadOfLabels(l); h != nil {
			out = append(out, h)
		}
	}
	return out
}

// Entries the cache never shows (a deleted CR's, whose release no pass reads again) do not
// stay: they expire writtenTTL after their last write.
func TestWrittenForgetsWhatNoPassReads(t *testing.T) {
	t.Parallel()
	clk := clocktesting.NewFakeClock(time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC))
	w := newWritten(clk)
	w.wrote(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "sh.helm.release.v1.gone.v1", ResourceVersion: "5", Labels: map[string]string{"name": "gone"}}}, "n")
	w.deleted("n", "sh.helm.release.v1.gone.v1")
	if len(w.releases.Keys()) != 1 {
		t.Fatalf("kept %v, want gone's delete", w.releases.Keys())
	}
	clk.Step(2 * writtenTTL)
	w.wrote(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "sh.helm.release.v1.web.v1", ResourceVersion: "6", Labels: map[string]string{"name": "web"}}}, "n")
	if keys := w.releases.Keys(); len(keys) != 1 || keys[0] != (types.NamespacedName{Namespace: "n", Name: "web"}) {
		t.Fatalf("kept %v, want only web's write", keys)
	}
}

func TestReleaseOfRecord(t *testing.T) {
	for name, want := range map[string]string{
		"sh.helm.release.v1.web.v12":   "web",
		"sh.helm.release.v1.a.v.b.v3":  "a.v.b",
		"sh.helm.release.v1.v2.v1":     "v2",
		"other":                        "",
		"sh.helm.release.v1.noversion": "",
	} {
		if got, ok := releaseOfRecord(name); got != want || ok != (want != "") {
			t.Errorf("releaseOfRecord(%q) = %q, %v; want %q", name, got, ok, want)
		}
	}
}
