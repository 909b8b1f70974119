package render

import (
	"math"

	"github.com/KimMachineGun/automemlimit/memlimit"
)

// MemoryLimit is the memory limit of the cgroup this process runs in (its container's, or
// the nearest limit above it), and false when it has none: the kernel's OOM killer stops the
// whole container, rudder and its workers together, at that limit. automemlimit finds it, as
// it does for GOMEMLIMIT, through /proc/self/cgroup and the mounts, cgroup v1 or v2.
func MemoryLimit() (int64, bool) {
	n, err := memlimit.FromCgroup()
	if err != nil || n == 0 || n > math.MaxInt64 {
		return 0, false
	}
	return int64(n), true
}

// Budget is the memory the renders of a pod whose memory limit is limit may hold at once, when
// rudder itself needs reserve; half the limit when the reserve leaves less (a pod sized too
// small still renders what fits).
func Budget(limit, reserve int64) int64 {
	if limit-reserve < limit/2 {
		return limit / 2
	}
	return limit - reserve
}
