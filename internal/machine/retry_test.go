package machine

import (
	"testing"
	"time"
)

func TestRetryBackoff(t *testing.T) {
	t.Parallel()
	for n, want := range map[int]time.Duration{0: 5 * time.Second, 1: 5 * time.Second, 2: 10 * time.Second, 3: 20 * time.Second,
		6: 160 * time.Second, 7: retryCap, 11: retryCap, 1000: retryCap} {
		if got := retryBackoff(n); got != want {
			t.Errorf("retryBackoff(%d) = %s, want %s", n, got, want)
		}
	}
}

// TestJitterSpreadsTenPercent: every jittered period is within ±10% of the period, and the
// draws cover both sides of it.
func TestJitterSpreadsTenPercent(t *testing.T) {
	t.Parallel()
	const d = time.Minute
	below, above := false, false
	for range 10000 {
		got := Jitter(d)
		if got < d*9/10 || got >= d*11/10 {
			t.Fatalf("Jitter(%s) = %s, outside ±10%%", d, got)
		}
		below, above = below || got < d, above || got > d
	}
	if !below || !above {
		t.Fatalf("10,000 draws all on one side of %s (below %v, above %v)", d, below, above)
	}
	if Jitter(0) != 0 || Jitter(-time.Second) != 0 {
		t.Fatal("Jitter of no period is not 0")
	}
}
