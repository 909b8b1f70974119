package faults_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/rudder-operator/rudder/internal/crtest"
)

// TestBoundsHoldInRuddersProcess: what a render returns is parsed, copied and sent in rudder's
// own process only within the render's bounds. Each attack used to take rudder down or grow it
// without end: a 4 MB scalar anchored once and aliased 2,000 times (8 GB once Helm's action
// parses the manifest), a template failing with a 20 MB message (copied into the log, the
// Event and the socket), and a render looking up 100,000 objects (a connection each). Run as
// the process it ships as, under a render budget, rudder stalls each CR naming its limit,
// serves another tenant's CR meanwhile, never exits, and its memory (workers counted),
// goroutines and file descriptors stay bounded and come back.
func TestBoundsHoldInRuddersProcess(t *testing.T) {
	crtest.NeedsCluster(t)
	port := freePort(t)
	r := start(t, "bounded", "--metrics-bind-address", "127.0.0.1:"+port, "--metrics-secure=false", "--render-memory-budget", "768Mi")
	metrics := "http://127.0.0.1:" + port + "/metrics"
	ns := crtest.NewNamespace(t, k8s, "bounds-")
	other := crtest.NewNamespace(t, k8s, "bystander-")
	createWeb(t, other, "warmup", "", 1)
	crtest.WaitCondition(t, k8s, webGVK, other, "warmup", "Ready", metav1.ConditionTrue, "", time.Minute)
	base := sample(t, r, metrics)

	ctx := context.Background()
	attacks := map[string]struct {
		manifest string
		limit    string
	}{
		"error":   {`{{ fail (repeat 20000000 "e") }}`, ""},
		"lookups": {`{{ range until 100000 }}{{ $_ := lookup "v1" "ConfigMap" $.Release.Namespace "x" }}{{ end }}`, "maxLookups"},
	}
	// The alias list is written out here: 2,000 aliases of the anchor.
	attacks["aliases"] = struct{ manifest, limit string }{"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: bomb}\ndata:\n  a: &x \"{{ repeat 4000000 \"x\" }}\"\n" +
		"  b: [" + strings.Repeat("*x, ", 1999) + "*x]\n", "maxManifestBytes"}
	author := crtest.Author(t, k8s, cluster.Config, ns, tenantBoxGVK.Group, "tenantboxes")
	for name, a := range attacks {
		if err := author.Create(ctx, crtest.NewCR(tenantBoxGVK, ns, name, map[string]any{"extraManifest": a.manifest})); err != nil {
			t.Fatal(err)
		}
	}
	peak := &peakSampler{}
	stop := peak.run(t, r, metrics)
	createWeb(t, other, "bystander", "", 1)
	crtest.WaitCondition(t, k8s, webGVK, other, "bystander", "Ready", metav1.ConditionTrue, "", time.Minute)
	for name, a := range attacks {
		u := crtest.WaitCondition(t, k8s, tenantBoxGVK, ns, name, "Stalled", metav1.ConditionTrue, "", 3*time.Minute)
		msg := crtest.Condition(u, "Stalled").Message
		if a.limit != "" && !strings.Contains(msg, a.limit) {
			t.Errorf("%s: Stalled does not name %s: %s", name, a.limit, msg)
		}
		if len(msg) > 8<<10 {
			t.Errorf("%s: a condition message of %d bytes", name, len(msg))
		}
	}
	stop()
	select {
	case <-r.done:
		t.Fatalf("rudder exited:\n%s", tail(r.logs()))
	default:
	}
	// rudder's own memory stays within what it keeps for itself (--render-memory-reserve); the
	// workers' within their budget.
	t.Logf("baseline %+v; peak %+v", base, peak.max)
	if peak.max.rudderRSS > 256<<20 {
		t.Errorf("rudder's own memory reached %d MiB (baseline %d MiB)", peak.max.rudderRSS>>20, base.rudderRSS>>20)
	}
	if peak.max.workersRSS > 768<<20+64<<20 {
		t.Errorf("the workers' memory reached %d MiB, over their 768 MiB budget", peak.max.workersRSS>>20)
	}
	if peak.max.fds > base.fds+64 || peak.max.goroutines > base.goroutines+200 {
		t.Errorf("file descriptors reached %d and goroutines %d (baseline %d and %d)", peak.max.fds, peak.max.goroutines, base.fds, base.goroutines)
	}
	// Once the attacks have stalled, what they opened is closed again.
	crtest.Eventually(t, "rudder's file descriptors and goroutines back to their baseline", time.Minute, func(context.Context) (bool, error) {
		s := sample(t, r, metrics)
		return s.fds <= base.fds+8 && s.goroutines <= base.goroutines+32, nil
	})
}

// usage is what rudder holds at one moment: its resident memory, its workers', its open file
// descriptors and goroutines.
type usage struct {
	rudderRSS, workersRSS int64
	fds, goroutines       int
}

func sample(t *testing.T, r *replica, metrics string) usage {
	t.Helper()
	pid := r.cmd.Process.Pid
	u := usage{rudderRSS: rss(pid), fds: countFDs(pid)}
	for _, child := range children(pid) {
		u.workersRSS += rss(child)
	}
	if resp, err := http.Get(metrics); err == nil {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		u.goroutines = int(crtest.SeriesSum(string(b), "go_goroutines", nil))
	}
	return u
}

// peakSampler keeps the highest of each figure while it runs.
type peakSampler struct {
	mu  sync.Mutex
	max usage
}

func (p *peakSampler) run(t *testing.T, r *replica, metrics string) (stop func()) {
	done, stopped := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(stopped)
		for {
			s := sample(t, r, metrics)
			p.mu.Lock()
			p.max.rudderRSS, p.max.workersRSS = max(p.max.rudderRSS, s.rudderRSS), max(p.max.workersRSS, s.workersRSS)
			p.max.fds, p.max.goroutines = max(p.max.fds, s.fds), max(p.max.goroutines, s.goroutines)
			p.mu.Unlock()
			select {
			case <-done:
				return
			case <-time.After(50 * time.Millisecond):
			}
		}
	}()
	return func() { close(done); <-stopped }
}

func rss(pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/statm", pid))
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) < 2 {
		return 0
	}
	pages, _ := strconv.ParseInt(f[1], 10, 64)
	return pages * int64(os.Getpagesize())
}

func countFDs(pid int) int {
	fds, _ := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	return len(fds)
}

// children are the processes whose parent is pid (rudder's render workers).
func children(pid int) []int {
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	var out []int
	for _, s := range stats {
		b, err := os.ReadFile(s)
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...: comm may hold spaces, so read after its closing paren.
		rest := string(b)
		if i := strings.LastIndexByte(rest, ')'); i >= 0 {
			rest = rest[i+1:]
		}
		f := strings.Fields(rest)
		if len(f) > 1 && f[1] == strconv.Itoa(pid) {
			n, _ := strconv.Atoi(filepath.Base(filepath.Dir(s)))
			out = append(out, n)
		}
	}
	return out
}

func freePort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	_, port, _ := net.SplitHostPort(l.Addr().String())
	return port
}
