package render

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/net/netutil"

	"github.com/rudder-operator/rudder/internal/libtext"
)

// process is one worker process, as the pool holds it, and the socket its lookups come back on.
type process struct {
	cmd      *exec.Cmd
	in       io.WriteCloser
	out      *bufio.Reader
	stderr   *tail
	dir      string
	srv      *http.Server
	upstream atomic.Pointer[Upstream]
	exited   chan struct{}
	// expiry stops the worker when it has been idle for idleFor (set while it is idle).
	expiry *time.Timer
}

func start(exe string) (*process, error) {
	dir, err := os.MkdirTemp("", socketDirPrefix+strconv.Itoa(os.Getpid())+"-")
	if err != nil {
		return nil, err
	}
	sock := filepath.Join(dir, "api.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	w := &process{dir: dir, stderr: &tail{}, exited: make(chan struct{})}
	// The worker holds at most lookupConns connections; the listener serves no more than
	// that, and closes those idle for lookupIdle, whatever the worker does.
	w.srv = &http.Server{Handler: &httputil.ReverseProxy{Rewrite: w.rewrite, Transport: roundTripperFunc(w.roundTrip)},
		ReadHeaderTimeout: 10 * time.Second, IdleTimeout: lookupIdle}
	go func() { _ = w.srv.Serve(netutil.LimitListener(ln, lookupConns)) }()

	resultsR, resultsW, err := os.Pipe()
	if err != nil {
		w.cleanup()
		return nil, err
	}
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), envWorker+"=1", envSocket+"="+sock)
	cmd.ExtraFiles = []*os.File{resultsW}
	cmd.Stderr = w.stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	in, err := cmd.StdinPipe()
	if err != nil {
		resultsR.Close()
		resultsW.Close()
		w.cleanup()
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		resultsR.Close()
		resultsW.Close()
		w.cleanup()
		return nil, fmt.Errorf("render: starting a worker: %w", err)
	}
	resultsW.Close()
	w.cmd, w.in, w.out = cmd, in, bufio.NewReaderSize(resultsR, 64<<10)
	go func() {
		_ = cmd.Wait()
		resultsR.Close()
		close(w.exited)
	}()
	return w, nil
}

// run sends job and waits for its result, within limits.
func (w *process) run(ctx context.Context, job *Job, limits Limits) (*Result, error) {
	type answer struct {
		res *Result
		err error
	}
	done := make(chan answer, 1)
	go func() {
		res := &Result{}
		err := readFrame(w.out, res, job.MaxFrame)
		done <- answer{res, err}
	}()
	if err := writeFrame(w.in, job); err != nil {
		w.kill()
		<-done
		return nil, w.died(fmt.Errorf("render: sending the job: %w", err), limits)
	}
	timer := time.NewTimer(limits.Timeout)
	defer timer.Stop()
	ticker := time.NewTicker(10 * time.Millisecond)
	defer ticker.Stop()
	for {
		select {
		case a := <-done:
			var fe *FrameError
			if errors.As(a.err, &fe) {
				// The worker wrote more than it may: the rest of the frame is never read.
				w.kill()
				return nil, &ExceededError{Bound: BoundOutput, Max: job.MaxBytes,
					What: fmt.Sprintf("the render sent %d bytes, over the %d its output may take", fe.Size, fe.Max)}
			}
			if a.err != nil {
				return nil, w.died(a.err, limits)
			}
			return a.res, nil
		case <-timer.C:
			w.kill()
			<-done
			return nil, &ExceededError{Bound: BoundTimeout, Max: int64(limits.Timeout),
				What: fmt.Sprintf("the render ran past %s and was stopped (a template that loops without end?)", limits.Timeout)}
		case <-ticker.C:
			if rss := w.rss(); limits.Memory > 0 && rss > limits.Memory {
				w.kill()
				<-done
				return nil, memoryExceeded(limits.Memory)
			}
		case <-ctx.Done():
			w.kill()
			<-done
			return nil, ctx.Err()
		}
	}
}

func memoryExceeded(max int64) error {
	return &ExceededError{Bound: BoundMemory, Max: max,
		What: fmt.Sprintf("the render used more than %d bytes and was stopped (a count fed to until or repeat?)", max)}
}

// died says why the worker ended mid-render under limits, from how it exited and what it wrote
// before it did.
func (w *process) died(err error, limits Limits) error {
	select {
	case <-w.exited:
	case <-time.After(5 * time.Second):
		w.kill()
		<-w.exited
	}
	msg := w.stderr.String()
	switch {
	case libtext.StackExceeded(msg):
		return &ExceededError{Bound: BoundStack, Max: workerStack,
			What: fmt.Sprintf("the render recursed past the %d-byte stack limit and was stopped (a value fed to tpl that calls tpl on itself?)",
				workerStack)}
	case w.cmd.ProcessState != nil && w.cmd.ProcessState.ExitCode() == exitMemory,
		libtext.OutOfMemory(msg):
		return memoryExceeded(limits.Memory)
	}
	last := strings.TrimSpace(msg)
	if i := strings.LastIndex(last, "\n"); i >= 0 {
		last = last[i+1:]
	}
	return fmt.Errorf("render: the worker ended (%w): %s", err, last)
}

func (w *process) kill() {
	if w.cmd != nil && w.cmd.Process != nil {
		_ = w.cmd.Process.Kill()
	}
}

func (w *process) stop() {
	if w.in != nil {
		w.in.Close()
	}
	w.kill()
	<-w.exited
	w.cleanup()
}

func (w *process) cleanup() {
	if w.srv != nil {
		_ = w.srv.Close()
	}
	os.RemoveAll(w.dir)
}

// rss is the worker's resident memory (0 when it cannot be read).
func (w *process) rss() int64 {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(w.cmd.Process.Pid) + "/statm")
	if err != nil {
		return 0
	}
	f := bytes.Fields(b)
	if len(f) < 2 {
		return 0
	}
	pages, _ := strconv.ParseInt(string(f[1]), 10, 64)
	return pages * int64(os.Getpagesize())
}

// rewrite sends a lookup of the worker's to the API server of the render it runs.
func (w *process) rewrite(r *httputil.ProxyRequest) {
	up := w.upstream.Load()
	if up == nil {
		return
	}
	r.Out.URL.Scheme, r.Out.URL.Host = up.URL.Scheme, up.URL.Host
	r.Out.URL.Path = strings.TrimSuffix(up.URL.Path, "/") + r.In.URL.Path
	r.Out.URL.RawPath = ""
	r.Out.Host = ""
}

func (w *process) roundTrip(req *http.Request) (*http.Response, error) {
	up := w.upstream.Load()
	if up == nil {
		return nil, errors.New("render: a lookup outside of a render")
	}
	return up.Transport.RoundTrip(req)
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// tail keeps the first and the last bytes a worker wrote to its standard error: a fatal error
// says what it was in its first line, then prints stacks.
type tail struct {
	mu   sync.Mutex
	head []byte
	buf  []byte
}

const headSize, tailSize = 4 << 10, 12 << 10

func (t *tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := len(p)
	if room := headSize - len(t.head); room > 0 {
		k := min(room, len(p))
		t.head = append(t.head, p[:k]...)
		p = p[k:]
	}
	t.buf = append(t.buf, p...)
	if len(t.buf) > tailSize {
		t.buf = append(t.buf[:0:0], t.buf[len(t.buf)-tailSize:]...)
	}
	return n, nil
}

func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.head) + string(t.buf)
}

// socketDirPrefix starts the name of a worker's socket directory, followed by the parent's
// process ID.
const socketDirPrefix = "rudder-render-"

// sweepSocketDirs removes the socket directories of parents that are gone (a process that was
// killed leaves them; its workers die with it).
func sweepSocketDirs() {
	dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), socketDirPrefix+"*"))
	for _, d := range dirs {
		pid, _, ok := strings.Cut(strings.TrimPrefix(filepath.Base(d), socketDirPrefix), "-")
		n, err := strconv.Atoi(pid)
		if !ok || err != nil || n == os.Getpid() {
			continue
		}
		if err := syscall.Kill(n, 0); errors.Is(err, syscall.ESRCH) {
			os.RemoveAll(d)
		}
	}
}
