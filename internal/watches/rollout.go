package watches

import (
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// What rollout.onHalt may say.
const (
	OnHaltHold     = "hold"
	OnHaltRollback = "rollback"
)

// DefaultHealthTimeout is rollout.healthTimeout's default.
const DefaultHealthTimeout = 5 * time.Minute

// movesMore refuses a wave that moves no CR the wave before it does not: counts and percents
// are totals of the waves so far, so a wave's must be larger than the one before it when both
// are of the same kind.
func movesMore(i int, prev, wv Wave) error {
	switch {
	case wv.Count > 0 && prev.Count >= wv.Count:
		return fmt.Errorf("rollout.waves[%d].count: %d moves no CR that the waves before it do not (count %d): a count is of the waves so far, "+
			"in all", i, wv.Count, prev.Count)
	case wv.Percent > 0 && prev.Percent >= wv.Percent:
		return fmt.Errorf("rollout.waves[%d].percent: %d moves no CR that the waves before it do not (percent %d): a percent is of the waves so "+
			"far, in all", i, wv.Percent, prev.Percent)
	}
	return nil
}

func (ck checking) checkRollout() error {
	w := ck.w
	r := w.Rollout
	if r == nil {
		return nil
	}
	if len(r.Waves) == 0 {
		return fmt.Errorf("rollout.waves: at least one wave, such as {count: 1}")
	}
	for i := range r.Waves {
		wv := &r.Waves[i]
		set := 0
		for _, ok := range []bool{wv.Count != 0, wv.Percent != 0, wv.Selector != nil} {
			if ok {
				set++
			}
		}
		switch {
		case set != 1:
			return fmt.Errorf("rollout.waves[%d]: exactly one of count, percent and selector", i)
		case wv.Count < 0:
			return fmt.Errorf("rollout.waves[%d].count: %d must be positive", i, wv.Count)
		case wv.Percent < 0 || wv.Percent > 100:
			return fmt.Errorf("rollout.waves[%d].percent: %d must be between 1 and 100", i, wv.Percent)
		case wv.Selector != nil && i > 0:
			return fmt.Errorf("rollout.waves[%d].selector: only the first wave (the canary) selects by label", i)
		case wv.Selector != nil:
			s, err := metav1.LabelSelectorAsSelector(wv.Selector)
			if err != nil {
				return fmt.Errorf("rollout.waves[%d].selector: %w", i, err)
			}
			wv.selector = s
		case i > 0:
			if err := movesMore(i, r.Waves[i-1], *wv); err != nil {
				return err
			}
		}
	}
	for _, d := range []struct {
		key string
		v   *metav1.Duration
	}{{"settle", r.Settle}, {"healthTimeout", r.HealthTimeout}} {
		if d.v != nil && d.v.Duration < 0 {
			return fmt.Errorf("rollout.%s: %s must not be negative", d.key, d.v.Duration)
		}
	}
	switch {
	case r.MaxFailures < 0:
		return fmt.Errorf("rollout.maxFailures: %d must not be negative", r.MaxFailures)
	case r.OnHalt != "" && r.OnHalt != OnHaltHold && r.OnHalt != OnHaltRollback:
		return fmt.Errorf("rollout.onHalt: %q must be %s or %s", r.OnHalt, OnHaltHold, OnHaltRollback)
	}
	return nil
}

// Selects reports whether the wave is a canary that selects the CR with these labels.
func (wv Wave) Selects(l map[string]string) bool {
	return wv.selector != nil && wv.selector.Matches(labels.Set(l))
}

// Target is how many CRs the waves up to this one move in all, of total.
func (wv Wave) Target(total int) int {
	switch {
	case wv.Count > 0:
		return min(wv.Count, total)
	case wv.Percent > 0:
		return (wv.Percent*total + 99) / 100
	}
	return 0 // a canary by selector: what it selects
}

// String is the wave as the Rollout's spec shows it.
func (wv Wave) String() string {
	switch {
	case wv.Count > 0:
		return fmt.Sprintf("%d", wv.Count)
	case wv.Percent > 0:
		return fmt.Sprintf("%d%%", wv.Percent)
	}
	return metav1.FormatLabelSelector(wv.Selector)
}

// SettleTime is rollout.settle, or its default.
func (r *Rollout) SettleTime() time.Duration {
	if r.Settle == nil {
		return 0
	}
	return r.Settle.Duration
}

// HealthTime is rollout.healthTimeout, or its default.
func (r *Rollout) HealthTime() time.Duration {
	if r.HealthTimeout == nil || r.HealthTimeout.Duration == 0 {
		return DefaultHealthTimeout
	}
	return r.HealthTimeout.Duration
}

// RollsBack reports whether a halt rolls the moved CRs back.
func (r *Rollout) RollsBack() bool { return r.OnHalt == OnHaltRollback }
