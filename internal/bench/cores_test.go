package bench_test

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"strconv"

	"golang.org/x/sys/unix"
)

// Core isolation: on a real cluster rudder runs in a Pod of its own, not on the API server's
// cores. Unless RUDDER_BENCH_SHARED_CORES is set, the control plane (etcd, kube-apiserver, the
// controller manager, the scheduler and kwok) gets CPU 0 and this process (rudder, and the
// plain clients of the baselines) the other CPUs, so that "the time the API server needs" is
// measured on the same cores in every phase and rudder's own work does not slow it down. Each
// phase's CPU time per process is reported either way.

// isolateCores reports whether the benchmark runs with isolated cores.
func isolateCores() bool {
	return os.Getenv("RUDDER_BENCH_SHARED_CORES") == "" && runtime.NumCPU() >= 2
}

// pinSelf sets the CPU affinity of every thread of this process. Processes forked afterwards
// inherit it; threads created afterwards inherit their creator's.
func pinSelf(cpus ...int) error {
	var set unix.CPUSet
	for _, c := range cpus {
		set.Set(c)
	}
	// Twice over: the runtime may start a thread while the first round runs.
	for range 2 {
		tasks, err := os.ReadDir("/proc/self/task")
		if err != nil {
			return err
		}
		for _, t := range tasks {
			tid, err := strconv.Atoi(t.Name())
			if err != nil {
				continue
			}
			if err := unix.SchedSetaffinity(tid, &set); err != nil && !errors.Is(err, unix.ESRCH) {
				return fmt.Errorf("thread %d: %w", tid, err)
			}
		}
	}
	return nil
}

// otherCPUs is every CPU but 0.
func otherCPUs() []int {
	var out []int
	for c := 1; c < runtime.NumCPU(); c++ {
		out = append(out, c)
	}
	return out
}
