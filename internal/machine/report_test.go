package machine

import (
	"testing"
	"time"
)

// Periodic passes land on the grid of a twelfth of the period, after the jittered period:
// CRs whose turns fall within one step of it pass at the same instant.
func TestPeriodicPassesShareTheirStep(t *testing.T) {
	t.Parallel()
	const period = time.Minute
	step := period / 12
	base := time.Date(2026, 12, 2, 21, 0, 0, 0, time.UTC)
	at := map[time.Time]int{}
	for i := range 1000 {
		now := base.Add(time.Duration(i) * 7 * time.Millisecond) // passes ending 7 s apart in all
		d := periodic(now, period)
		next := now.Add(d)
		if next.Truncate(step) != next {
			t.Fatalf("next pass at %s is off the %s grid", next, step)
		}
		if lo, hi := 9*period/10, 11*period/10+step; d < lo || d > hi {
			t.Fatalf("next pass in %s, outside [%s, %s]", d, lo, hi)
		}
		at[next]++
	}
	// 1000 passes over 7 s, each jittered over 12 s, fall on the few steps those span.
	if len(at) > 5 {
		t.Errorf("1000 periodic passes at %d instants, want at most 5: %v", len(at), at)
	}
	if d := periodic(base, 0); d != 0 {
		t.Errorf("no period: next pass in %s, want none", d)
	}
}
