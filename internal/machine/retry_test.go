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
