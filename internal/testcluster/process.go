package testcluster

import (
	"bytes"
	"context"
	_ "embed"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
)

func (c *Cluster) startKwok() error {
	stages := strings.ReplaceAll(stagesYAML, "DEFAULT_COMPLETE_MS",
		strconv.FormatInt(c.opts.PodCompleteAfter.Milliseconds(), 10))
	cfgPath := filepath.Join(c.Dir, "kwok-stages.yaml")
	if err := os.WriteFile(cfgPath, []byte(stages), 0o644); err != nil {
		return err
	}
	addr, err := FreeAddr()
	if err != nil {
		return err
	}
	return c.start("kwok",
		"--kubeconfig="+c.Kubeconfig,
		"--config="+cfgPath,
		"--manage-all-nodes=false",
		"--manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake",
		// Only allocated, never routed: nothing sends traffic to these addresses.
		"--cidr=10.244.0.1/16",
		"--node-ip=10.244.0.1",
		"--server-address="+addr.String(),
	)
}

// start launches one component; it is killed if this process dies (Pdeathsig), so nothing
// outlives a crashed test binary.
func (c *Cluster) start(name string, args ...string) error {
	bin := filepath.Join(c.binDir, name)
	if _, err := os.Stat(bin); err != nil {
		return fmt.Errorf("%s not found in %s: run `make tools`: %w", name, c.binDir, err)
	}
	logf, err := os.OpenFile(filepath.Join(c.Dir, name+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return fmt.Errorf("starting %s: %w", name, err)
	}
	p := &process{name: name, cmd: cmd, log: logf, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	c.mu.Lock()
	c.procs = append(c.procs, p)
	c.mu.Unlock()
	return nil
}

// waitReady waits until the started components are doing their jobs: the default
// ServiceAccount exists (controller-manager), the kwok node is Ready.
func (c *Cluster) waitReady(ctx context.Context) error {
	cs, err := kubernetes.NewForConfig(c.Config)
	if err != nil {
		return err
	}
	if c.opts.Kwok {
		node := &corev1.Node{
			ObjectMeta: metav1.ObjectMeta{
				Name:        NodeName,
				Annotations: map[string]string{"kwok.x-k8s.io/node": "fake", "node.alpha.kubernetes.io/ttl": "0"},
				Labels: map[string]string{
					"type": "kwok", "kubernetes.io/hostname": NodeName, "kubernetes.io/os": "linux",
					"kubernetes.io/arch": "amd64", "node-role.kubernetes.io/agent": "",
				},
			},
			Status: corev1.NodeStatus{Allocatable: corev1.ResourceList{
				corev1.ResourcePods: resource.MustParse("1000000"),
			}},
		}
		if _, err := cs.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating kwok node: %w", err)
		}
	}
	ctx, cancel := context.WithTimeout(ctx, 90*time.Second)
	defer cancel()
	err = wait.PollUntilContextCancel(ctx, 250*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		if dead := c.deadProcess(); dead != "" {
			return false, fmt.Errorf("%s exited during start-up; see %s", dead, filepath.Join(c.Dir, dead+".log"))
		}
		if c.opts.ControllerManager {
			if _, err := cs.CoreV1().ServiceAccounts("default").Get(ctx, "default", metav1.GetOptions{}); err != nil {
				return false, nil
			}
		}
		if c.opts.Kwok {
			n, err := cs.CoreV1().Nodes().Get(ctx, NodeName, metav1.GetOptions{})
			if err != nil || !nodeReady(n) {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		return fmt.Errorf("waiting for the control plane: %w (logs in %s)", err, c.Dir)
	}
	return nil
}

func nodeReady(n *corev1.Node) bool {
	for _, cond := range n.Status.Conditions {
		if cond.Type == corev1.NodeReady {
			return cond.Status == corev1.ConditionTrue
		}
	}
	return false
}

func (c *Cluster) deadProcess() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, p := range c.procs {
		select {
		case <-p.done:
			return p.name
		default:
		}
	}
	return ""
}

// Running reports whether the named component (kube-controller-manager, kube-scheduler, kwok,
// or etcd and kube-apiserver once KillAndRestart started them again) was started and its
// newest process has not exited.
func (c *Cluster) Running(name string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i := len(c.procs) - 1; i >= 0; i-- {
		if p := c.procs[i]; p.name == name {
			select {
			case <-p.done:
				return false
			default:
				return true
			}
		}
	}
	return false
}

// openLog opens the log of a component that envtest starts; Stop closes it.
func (c *Cluster) openLog(name string) io.Writer {
	f, err := os.OpenFile(filepath.Join(c.Dir, name+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return io.Discard
	}
	c.logs = append(c.logs, f)
	return f
}

// KillAndRestart SIGKILLs one of the cluster's processes (etcd, kube-apiserver, or one this
// package started, such as kwok), keeps it down for down, then starts it again with the same
// command line (same ports, certificates and data), as a node reboot would, and waits until
// the API server is ready again. After etcd, kwok is restarted too (see below). The
// restarted process is stopped by Stop.
func (c *Cluster) KillAndRestart(ctx context.Context, name string, down time.Duration) error {
	bin := filepath.Join(c.binDir, name)
	pid, args, err := childProcess(bin)
	if err != nil {
		return err
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		return fmt.Errorf("killing %s (pid %d): %w", name, pid, err)
	}
	gone := func(context.Context) (bool, error) {
		_, err := os.Stat(fmt.Sprintf("/proc/%d", pid))
		return errors.Is(err, os.ErrNotExist), nil
	}
	if err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 30*time.Second, true, gone); err != nil {
		return fmt.Errorf("%s (pid %d) did not die: %w", name, pid, err)
	}
	select {
	case <-time.After(down):
	case <-ctx.Done():
		return ctx.Err()
	}
	if err := c.start(name, args...); err != nil {
		return err
	}
	cs, err := kubernetes.NewForConfig(c.Config)
	if err != nil {
		return err
	}
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		_, err := cs.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		return err == nil, nil
	})
	if err != nil || name != "etcd" || !c.Running("kwok") {
		return err
	}
	// A kubelet retries a pod status update until it lands. kwok v0.8 drops a pod's stage
	// when the API server answers with an internal error, which is what every write gets
	// while etcd is down: the pod would stay Pending until something else touches it.
	// Restarting kwok stands in for the kubelet's retry: the new kwok replays the stages of
	// every pod it has not finished.
	return c.KillAndRestart(ctx, "kwok", 0)
}

// childProcess finds this process's child running bin and returns its pid and arguments.
func childProcess(bin string) (int, []string, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return 0, nil, err
	}
	me := os.Getpid()
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...: comm may hold spaces, so read after the last ')'.
		fields := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
		if len(fields) < 2 || fields[1] != strconv.Itoa(me) {
			continue
		}
		raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		if err != nil {
			continue
		}
		argv := strings.Split(strings.TrimRight(string(raw), "\x00"), "\x00")
		if len(argv) > 0 && argv[0] == bin {
			return pid, argv[1:], nil
		}
	}
	return 0, nil, fmt.Errorf("no child process runs %s", bin)
}
