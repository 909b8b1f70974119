package render

import (
	"os"
	"strconv"
	"strings"
)

// The files a container's memory limit is read from: cgroup v2's, then v1's.
var memoryLimitFiles = []string{"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"}

// MemoryLimit is the memory limit of the cgroup this process runs in (its container's), and
// false when it has none: the kernel's OOM killer stops the whole container, rudder and its
// workers together, at that limit.
func MemoryLimit() (int64, bool) {
	for _, f := range memoryLimitFiles {
		if n, ok := readLimit(f); ok {
			return n, n > 0
		}
	}
	return 0, false
}

// readLimit reads a cgroup memory limit file; ok is false when there is no such file. An
// unlimited cgroup reads as 0.
func readLimit(file string) (n int64, ok bool) {
	b, err := os.ReadFile(file)
	if err != nil {
		return 0, false
	}
	s := strings.TrimSpace(string(b))
	if s == "max" {
		return 0, true
	}
	n, err = strconv.ParseInt(s, 10, 64)
	if err != nil || n >= 1<<60 { // v1 writes "no limit" as a page-rounded 2^63-1
		return 0, true
	}
	return n, true
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
