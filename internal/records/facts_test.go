package records

import (
	"strconv"
	"testing"
	"time"

	"helm.sh/helm/v4/pkg/release/common"
	"k8s.io/apimachinery/pkg/util/validation"
)

// Facts survive their labels: what Labels writes, FactsOf reads back, and a record's labels
// hold nothing but label values.
func TestFactsRoundTripThroughLabels(t *testing.T) {
	at := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	for _, f := range []Facts{
		{},
		{Failed: &Failure{ChartDigest: LabelDigest("sha256:" + hex64), ValuesDigest: "v1", Cause: "UpgradeFailed", Count: 3, At: at}},
		{Failed: &Failure{ChartDigest: "c", ValuesDigest: "v", Cause: "InstallFailed", Count: 1}}, // no time: an older status's
		{RollbackTo: HandledValue("3"), ReconcileAt: HandledValue("2026-12-02T12:00:00Z"), ResetAt: HandledValue("a b:c/d")},
		{Applied: &Applied{Generation: 7, ChartDigest: "c"}},
	} {
		l := f.Labels(4)
		for k, v := range l {
			if errs := validation.IsValidLabelValue(v); len(errs) > 0 {
				t.Errorf("label %s=%q is not a label value", k, v)
			}
		}
		got := FactsOf(l)
		if got == nil || got.Of != 4 || !got.Equal(&f) {
			t.Errorf("%+v read back as %+v (labels %v)", f, got, l)
		}
	}
	if FactsOf(map[string]string{LabelRollbackToHandled: HandledValue("1")}) != nil {
		t.Error("labels without rudder.dev/facts (an older rudder's record) read as facts")
	}
	if HandledValue(" 3 ") != HandledValue("3") || HandledValue("") != "" || HandledValue("3") == HandledValue("4") {
		t.Error("HandledValue")
	}
}

// The release's facts are those of the newest record that carries its own: a rollback's copy
// of an older revision's facts is not them.
func TestNewestHeadTakesTheNewestOwnFacts(t *testing.T) {
	rec := func(version int, status common.Status, facts *Facts, of int) *Head {
		l := map[string]string{"version": itoa(version), "status": string(status)}
		if facts != nil {
			for k, v := range facts.Labels(of) {
				l[k] = v
			}
		}
		return HeadOfLabels(l)
	}
	old := &Facts{RollbackTo: HandledValue("1")}
	cur := &Facts{RollbackTo: HandledValue("2"), Applied: &Applied{Generation: 3, ChartDigest: "c"}}
	h := NewestHead([]*Head{
		rec(1, common.StatusSuperseded, old, 1),
		rec(2, common.StatusSuperseded, cur, 2),
		rec(3, common.StatusDeployed, old, 1), // helm rollback to 1: a copy of its labels
	})
	if h.Revision != 3 || h.Facts == nil || !h.Facts.Equal(cur) || h.Facts.Of != 2 {
		t.Fatalf("newest %d with facts %+v, want revision 2's", h.Revision, h.Facts)
	}
	if h := NewestHead([]*Head{rec(1, common.StatusDeployed, nil, 0)}); h.Facts != nil {
		t.Fatalf("an older rudder's record read with facts %+v", h.Facts)
	}
}

// FactsPatch sets exactly the facts: every fact label the facts do not hold is removed.
func TestFactsPatchRemovesWhatIsNotKnown(t *testing.T) {
	p := FactsPatch(Facts{ResetAt: HandledValue("a")}, 2)
	labels := p["metadata"].(map[string]any)["labels"].(map[string]any)
	if len(labels) != len(FactLabels) {
		t.Fatalf("patch %v names %d labels, want all %d", labels, len(labels), len(FactLabels))
	}
	if labels[LabelFacts] != "2" || labels[LabelResetAtHandled] != HandledValue("a") || labels[LabelFailedChart] != nil {
		t.Fatalf("patch %v", labels)
	}
}

const hex64 = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

func itoa(n int) string { return strconv.Itoa(n) }
