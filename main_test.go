package main

import "testing"

func TestMemoryPolicy(t *testing.T) {
	const mi = 1 << 20
	env := func(kv ...string) func(string) string {
		return func(k string) string {
			for i := 0; i+1 < len(kv); i += 2 {
				if kv[i] == k {
					return kv[i+1]
				}
			}
			return ""
		}
	}
	for _, c := range []struct {
		name          string
		getenv        func(string) string
		limit, budget int64
		gc            int
		mem           int64
	}{
		{"no container limit", env(), 0, 0, defaultGCPercent, 0},
		{"rudder's share of the container", env(), 1024 * mi, 768 * mi, defaultGCPercent, 256 * mi},
		{"no render budget: the whole container", env(), 1024 * mi, 0, defaultGCPercent, 1024 * mi},
		{"a budget as large as the container leaves rudder no share to set", env(), 1024 * mi, 1024 * mi, defaultGCPercent, 0},
		{"GOGC set: the runtime's", env("GOGC", "200"), 1024 * mi, 768 * mi, 0, 256 * mi},
		{"GOMEMLIMIT set: the runtime's", env("GOMEMLIMIT", "300MiB"), 1024 * mi, 768 * mi, defaultGCPercent, 0},
	} {
		gc, mem := memoryPolicy(c.getenv, c.limit, c.budget)
		if gc != c.gc || mem != c.mem {
			t.Errorf("%s: GOGC %d, limit %d; want %d, %d", c.name, gc, mem, c.gc, c.mem)
		}
	}
}
