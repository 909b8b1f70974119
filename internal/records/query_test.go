package records

import (
	"context"
	"errors"
	"testing"

	"helm.sh/helm/v4/pkg/release/common"
	release "helm.sh/helm/v4/pkg/release/v1"
	"helm.sh/helm/v4/pkg/storage"
	"helm.sh/helm/v4/pkg/storage/driver"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crfake "sigs.k8s.io/controller-runtime/pkg/client/fake"
)

// records stores revisions of releases in cs, rudder's (with an owner UID) or another tool's,
// and returns caches of the metadata of those the caches have seen: rudder's and the others'.
func records(t *testing.T, cs *fake.Clientset, seen map[string]bool, revs ...*release.Release) (own, foreign client.Reader) {
	t.Helper()
	ownB := crfake.NewClientBuilder().WithIndex(ReleaseSecret(), ReleaseSecretIndex, ReleaseNameOf)
	foreignB := crfake.NewClientBuilder().WithIndex(ReleaseSecret(), ReleaseSecretIndex, ReleaseNameOf)
	d := NewDriver(cs.CoreV1().Secrets("ns"))
	for _, r := range revs {
		key := RecordName(r.Name, r.Version)
		if err := d.Create(key, r); err != nil {
			t.Fatal(err)
		}
		if !seen[key] {
			continue
		}
		s, err := cs.CoreV1().Secrets("ns").Get(context.Background(), key, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		m := ReleaseSecret()
		m.ObjectMeta = s.ObjectMeta
		if r.Labels[LabelOwnerUID] != "" {
			ownB = ownB.WithObjects(m)
		} else {
			foreignB = foreignB.WithObjects(m)
		}
	}
	return ownB.Build(), foreignB.Build()
}

func rev(name string, version int, st common.Status, ours bool) *release.Release {
	r := testRelease(version, st)
	r.Name = name
	if !ours {
		r.Labels = nil
	}
	return r
}

func verbs(cs *fake.Clientset) map[string]int {
	out := map[string]int{}
	for _, a := range cs.Actions() {
		out[a.GetVerb()]++
	}
	return out
}

// TestInstallNameCheckFromTheCaches: a name neither cache shows is free without a request; a
// name either shows (rudder's, or another tool's whose revision 1 is long pruned) goes to
// Helm's LIST, which finds it; a name taken after the caches' view is refused by the create
// of revision 1.
func TestInstallNameCheckFromTheCaches(t *testing.T) {
	cs := fake.NewClientset()
	seen := map[string]bool{RecordName("ours", 1): true, RecordName("theirs", 7): true}
	own, foreign := records(t, cs, seen, rev("ours", 1, common.StatusDeployed, true),
		rev("theirs", 7, common.StatusDeployed, false), rev("late", 1, common.StatusDeployed, false))
	d := NewDriver(cs.CoreV1().Secrets("ns")).WithQueries(QueryInstall, "ns", own, foreign)
	q := func(name string) ([]*release.Release, error) {
		return V1sOf(d.Query(map[string]string{"name": name, "owner": "helm"}))
	}
	cs.ClearActions()
	if _, err := q("free"); !errors.Is(err, driver.ErrReleaseNotFound) {
		t.Fatalf("a free name: %v", err)
	}
	if n := len(cs.Actions()); n != 0 {
		t.Errorf("a name the caches show free cost %d requests", n)
	}
	for _, name := range []string{"ours", "theirs"} {
		cs.ClearActions()
		if h, err := q(name); err != nil || len(h) != 1 {
			t.Errorf("%s: %d revisions, %v", name, len(h), err)
		}
		if v := verbs(cs); v["list"] != 1 {
			t.Errorf("%s: %v, want Helm's LIST", name, v)
		}
	}
	// "late" was made after the caches' view: its name reads free, and its revision 1 is
	// there, so storing one is refused.
	if _, err := q("late"); !errors.Is(err, driver.ErrReleaseNotFound) {
		t.Fatalf("late: %v", err)
	}
	if err := d.Create(RecordName("late", 1), rev("late", 1, common.StatusPendingInstall, true)); !errors.Is(err, driver.ErrReleaseExists) {
		t.Fatalf("revision 1 of a name the caches had not seen: %v, want ErrReleaseExists", err)
	}
	// Without a cache of the others' records, the check is Helm's.
	cs.ClearActions()
	plain := NewDriver(cs.CoreV1().Secrets("ns")).WithQueries(QueryInstall, "ns", own, nil)
	if _, err := plain.Query(map[string]string{"name": "free", "owner": "helm"}); !errors.Is(err, driver.ErrReleaseNotFound) || verbs(cs)["list"] != 1 {
		t.Fatalf("without the foreign cache: %v, %v", err, verbs(cs))
	}
}

// TestUpgradeReadsHistoryByName: an upgrade's reads of the release's history GET the records
// the cache shows and the revisions after them, by name, never LIST the namespace; a revision
// the cache has not seen yet is found.
func TestUpgradeReadsHistoryByName(t *testing.T) {
	cs := fake.NewClientset()
	seen := map[string]bool{RecordName("web", 1): true, RecordName("web", 2): true}
	own, foreign := records(t, cs, seen, rev("web", 1, common.StatusSuperseded, true),
		rev("web", 2, common.StatusSuperseded, true), rev("web", 3, common.StatusDeployed, true))
	d := NewDriver(cs.CoreV1().Secrets("ns")).WithQueries(QueryUpgrade, "ns", own, foreign)
	st := storage.Init(d)
	cs.ClearActions()
	last, err := V1Of(st.Last("web"))
	if err != nil || last.Version != 3 {
		t.Fatalf("last: %v %v, want revision 3 (which the cache has not seen)", last, err)
	}
	deployed, err := V1Of(st.Deployed("web"))
	if err != nil || deployed.Version != 3 {
		t.Fatalf("deployed: %v %v, want revision 3", deployed, err)
	}
	if v := verbs(cs); v["list"] != 0 || v["get"] == 0 {
		t.Errorf("an upgrade's history reads sent %v; want GETs of named records only", v)
	}
}

// TestNewestByName: the newest revision is read by name — the newest the cache shows, then
// those after it — in one GET per revision from there, never a LIST; a name the cache does
// not show, and a newest revision that is gone, are left to storage, and a name the cache
// does not show costs no request.
func TestNewestByName(t *testing.T) {
	cs := fake.NewClientset()
	seen := map[string]bool{RecordName("web", 1): true, RecordName("web", 2): true, RecordName("gone", 4): true}
	own, foreign := records(t, cs, seen, rev("web", 1, common.StatusSuperseded, true),
		rev("web", 2, common.StatusSuperseded, true), rev("web", 3, common.StatusDeployed, true), rev("gone", 4, common.StatusDeployed, true))
	if err := cs.CoreV1().Secrets("ns").Delete(context.Background(), RecordName("gone", 4), metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	d := NewDriver(cs.CoreV1().Secrets("ns")).WithQueries(QueryUpgrade, "ns", own, foreign)
	cs.ClearActions()
	rel, ok, err := d.Newest("web")
	if err != nil || !ok || rel.Version != 3 || rel.Labels[LabelOwnerUID] == "" {
		t.Fatalf("web: %v %v %v, want revision 3 (which the cache has not seen), with its labels", rel, ok, err)
	}
	if v := verbs(cs); v["list"] != 0 || v["get"] != 3 {
		t.Errorf("reading the newest revision sent %v; want 3 GETs (revisions 2, 3 and the absent 4)", v)
	}
	for _, name := range []string{"gone", "unknown"} {
		cs.ClearActions()
		if rel, ok, err := d.Newest(name); ok || err != nil || rel != nil {
			t.Errorf("%s: %v %v %v, want it left to storage", name, rel, ok, err)
		}
		if name == "unknown" && len(cs.Actions()) != 0 {
			t.Errorf("a name the cache does not show cost %d requests", len(cs.Actions()))
		}
	}
}
