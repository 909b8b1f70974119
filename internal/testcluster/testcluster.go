package testcluster

import (
	"bytes"
	"context"
	_ "embed"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

//go:embed stages.yaml
var stagesYAML string

// NodeName is the name of the simulated node that kwok manages.
const NodeName = "kwok-node-0"

// Options say which components to run. The zero value runs etcd and kube-apiserver only.
type Options struct {
	// BinDir holds etcd, kube-apiserver, kube-controller-manager, kube-scheduler and kwok.
	// Empty: $RUDDER_BIN_DIR, else bin/ at the root of the repository holding the working
	// directory.
	BinDir string
	// Dir receives the kubeconfig, certificates and component logs. Empty: a new temp dir,
	// removed by Stop unless KeepDir is set.
	Dir     string
	KeepDir bool

	// ControllerManager runs kube-controller-manager (Deployments → ReplicaSets → Pods,
	// garbage collection, Deployment status, namespace deletion).
	ControllerManager bool
	// Scheduler runs kube-scheduler, which binds Pods to the kwok node.
	Scheduler bool
	// Kwok runs kwok with one simulated Node: Pods become Running and Ready, Pods with
	// restartPolicy Never/OnFailure complete after PodCompleteAfter.
	Kwok bool
	// PodCompleteAfter is how long a run-to-completion Pod stays Running (default 2s).
	PodCompleteAfter time.Duration

	// CRDDirectoryPaths are installed before Start returns.
	CRDDirectoryPaths []string
}

// All returns Options that run every component.
func All() Options {
	return Options{ControllerManager: true, Scheduler: true, Kwok: true}
}

// Cluster is a running control plane.
type Cluster struct {
	// Config is an admin (system:masters) client configuration.
	Config *rest.Config
	// Kubeconfig is the path of an admin kubeconfig file for kubectl and helm.
	Kubeconfig string
	// Dir holds the kubeconfig and the component logs (<component>.log).
	Dir string

	env     *envtest.Environment
	opts    Options
	binDir  string
	mu      sync.Mutex
	procs   []*process
	logs    []*os.File
	stopped bool
}

type process struct {
	name string
	cmd  *exec.Cmd
	log  *os.File
	done chan struct{}
	err  error
}

// Start brings up the control plane. On error everything already started is stopped.
func Start(ctx context.Context, opts Options) (*Cluster, error) {
	binDir, err := resolveBinDir(opts.BinDir)
	if err != nil {
		return nil, err
	}
	dir := opts.Dir
	if dir == "" {
		if dir, err = os.MkdirTemp("", "rudder-testcluster-"); err != nil {
			return nil, err
		}
	} else if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	if opts.PodCompleteAfter <= 0 {
		opts.PodCompleteAfter = 2 * time.Second
	}
	c := &Cluster{Dir: dir, opts: opts, binDir: binDir}

	env := &envtest.Environment{
		BinaryAssetsDirectory:   binDir,
		CRDDirectoryPaths:       opts.CRDDirectoryPaths,
		ErrorIfCRDPathMissing:   true,
		ControlPlaneStopTimeout: 30 * time.Second,
	}
	etcdLog, apiLog := c.openLog("etcd"), c.openLog("kube-apiserver")
	env.ControlPlane.Etcd = &envtest.Etcd{Out: etcdLog, Err: etcdLog}
	api := &envtest.APIServer{Out: apiLog, Err: apiLog}
	args := api.Configure()
	// Loopback: there is no real endpoint to reconcile for the kubernetes Service.
	args.Set("endpoint-reconciler-type", "none")
	// A /16 so that hundreds of Services fit; it is only allocated, never routed.
	args.Set("service-cluster-ip-range", "10.96.0.0/16")
	args.Set("authorization-mode", "RBAC")
	args.Set("allow-privileged", "true")
	// /debug/pprof for admins, as on a default kube-apiserver (make bench can profile it).
	args.Set("profiling", "true")
	env.ControlPlane.APIServer = api
	c.env = env

	cfg, err := env.Start()
	if err != nil {
		_ = env.Stop() // CRD installation can fail after etcd and the API server started
		return nil, fmt.Errorf("starting etcd and kube-apiserver from %s: %w (logs in %s)", binDir, err, dir)
	}
	c.Config = cfg
	ok := false
	defer func() {
		if !ok {
			_ = c.Stop()
		}
	}()

	admin, err := env.AddUser(envtest.User{Name: "rudder-admin", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		return nil, err
	}
	c.Config = admin.Config()
	kc, err := admin.KubeConfig()
	if err != nil {
		return nil, err
	}
	c.Kubeconfig = filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(c.Kubeconfig, kc, 0o600); err != nil {
		return nil, err
	}

	certDir := api.CertDir
	if opts.ControllerManager {
		caFile := filepath.Join(dir, "apiserver-ca.crt")
		if err := os.WriteFile(caFile, api.CA, 0o600); err != nil {
			return nil, err
		}
		if err := c.start("kube-controller-manager",
			"--kubeconfig="+c.Kubeconfig,
			"--authentication-kubeconfig="+c.Kubeconfig,
			"--authorization-kubeconfig="+c.Kubeconfig,
			"--service-account-private-key-file="+filepath.Join(certDir, "sa-signer.key"),
			"--root-ca-file="+caFile,
			"--leader-elect=false",
			"--secure-port=0",
			"--controllers=*",
			"--concurrent-deployment-syncs=10",
			"--concurrent-replicaset-syncs=10",
			"--concurrent-gc-syncs=20",
			// The default 20 QPS would make the controller manager, not what is under test, the
			// bottleneck as soon as a test or benchmark creates a few hundred Deployments.
			"--kube-api-qps=200",
			"--kube-api-burst=400",
			"--node-monitor-grace-period=60s",
		); err != nil {
			return nil, err
		}
	}
	if opts.Scheduler {
		if err := c.start("kube-scheduler",
			"--kubeconfig="+c.Kubeconfig,
			"--authentication-kubeconfig="+c.Kubeconfig,
			"--authorization-kubeconfig="+c.Kubeconfig,
			"--leader-elect=false",
			"--secure-port=0",
		); err != nil {
			return nil, err
		}
	}
	if opts.Kwok {
		if err := c.startKwok(); err != nil {
			return nil, err
		}
	}
	if err := c.waitReady(ctx); err != nil {
		return nil, err
	}
	ok = true
	return c, nil
}

func (c *Cluster) startKwok() error {
	stages := strings.ReplaceAll(stagesYAML, "DEFAULT_COMPLETE_MS",
		strconv.FormatInt(c.opts.PodCompleteAfter.Milliseconds(), 10))
	cfgPath := filepath.Join(c.Dir, "kwok-stages.yaml")
	if err := os.WriteFile(cfgPath, []byte(stages), 0o644); err != nil {
		return err
	}
	port, err := freePort()
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
		"--server-address=127.0.0.1:"+strconv.Itoa(port),
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

// Running reports whether the named component (kube-controller-manager, kube-scheduler, kwok)
// was started and has not exited.
func (c *Cluster) Running(name string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, p := range c.procs {
		if p.name == name {
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

// Stop stops every component, the extra ones first, and removes Dir unless KeepDir is set.
func (c *Cluster) Stop() error {
	c.mu.Lock()
	if c.stopped {
		c.mu.Unlock()
		return nil
	}
	c.stopped = true
	procs := c.procs
	c.mu.Unlock()

	var errs []error
	for i := len(procs) - 1; i >= 0; i-- {
		p := procs[i]
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGTERM)
		select {
		case <-p.done:
		case <-time.After(10 * time.Second):
			_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
			<-p.done
		}
		p.log.Close()
	}
	if c.env != nil {
		if err := c.env.Stop(); err != nil {
			errs = append(errs, fmt.Errorf("stopping etcd/kube-apiserver: %w", err))
		}
	}
	for _, f := range c.logs {
		f.Close()
	}
	if !c.opts.KeepDir && c.opts.Dir == "" {
		_ = os.RemoveAll(c.Dir)
	}
	return errors.Join(errs...)
}

// Command runs one of the tools of BinDir (kubectl, helm, …) against the cluster: KUBECONFIG
// is the admin kubeconfig, and helm's cache, config and data live under Dir, away from the
// user's. Set the returned command's Dir for relative paths.
func (c *Cluster) Command(tool string, args ...string) *exec.Cmd {
	cmd := exec.Command(filepath.Join(c.binDir, tool), args...)
	helm := filepath.Join(c.Dir, "helm")
	cmd.Env = append(os.Environ(), "KUBECONFIG="+c.Kubeconfig, "HELM_CACHE_HOME="+filepath.Join(helm, "cache"),
		"HELM_CONFIG_HOME="+filepath.Join(helm, "config"), "HELM_DATA_HOME="+filepath.Join(helm, "data"))
	return cmd
}

// DumpLogs writes the tail of every component's log to w: for a failing test.
func (c *Cluster) DumpLogs(w io.Writer) {
	for _, name := range []string{"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok"} {
		b, err := os.ReadFile(filepath.Join(c.Dir, name+".log"))
		if err != nil {
			continue
		}
		if len(b) > 8000 {
			b = b[len(b)-8000:]
		}
		fmt.Fprintf(w, "==== %s (tail) ====\n%s\n", name, bytes.TrimSpace(b))
	}
}

func resolveBinDir(dir string) (string, error) {
	if dir == "" {
		dir = os.Getenv("RUDDER_BIN_DIR")
	}
	if dir == "" {
		root, err := RepoRoot()
		if err != nil {
			return "", err
		}
		dir = filepath.Join(root, "bin")
	}
	return filepath.Abs(dir)
}

// RepoRoot finds the directory of rudder's go.mod above the working directory.
func RepoRoot() (string, error) {
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for d := wd; ; d = filepath.Dir(d) {
		if b, err := os.ReadFile(filepath.Join(d, "go.mod")); err == nil &&
			bytes.HasPrefix(b, []byte("module github.com/rudder-operator/rudder\n")) {
			return d, nil
		}
		if filepath.Dir(d) == d {
			return "", fmt.Errorf("no rudder go.mod above %s", wd)
		}
	}
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
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

// ShortMode is for a TestMain whose package's tests need the control plane: under
// `go test -short` it reports true, having narrowed the run to the package's unit tests
// (unitTests, a -run pattern; "" runs none), so that `go test -short ./...` needs no bin/.
func ShortMode(unitTests string) bool {
	if !flag.Parsed() {
		flag.Parse()
	}
	if !testing.Short() {
		return false
	}
	if unitTests == "" {
		unitTests = "^$"
	}
	_ = flag.Set("test.run", unitTests)
	fmt.Fprintln(os.Stderr, "testcluster: -short: integration tests skipped (they need the control plane from bin/)")
	return true
}

// KillAndRestart SIGKILLs one of the processes envtest started for this cluster (etcd or
// kube-apiserver), keeps it down for down, then starts it again with the same command line
// (same ports, certificates and data), as a node reboot would, and waits until the API server
// is ready again. The restarted process is stopped by Stop.
func (c *Cluster) KillAndRestart(ctx context.Context, name string, down time.Duration) error {
	bin := filepath.Join(c.binDir, name)
	pid, args, err := childProcess(bin)
	if err != nil {
		return err
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		return fmt.Errorf("killing %s (pid %d): %w", name, pid, err)
	}
	for deadline := time.Now().Add(30 * time.Second); ; {
		if _, err := os.Stat(fmt.Sprintf("/proc/%d", pid)); errors.Is(err, os.ErrNotExist) {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s (pid %d) did not die", name, pid)
		}
		time.Sleep(50 * time.Millisecond)
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
	return wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		_, err := cs.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		return err == nil, nil
	})
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

// ClientConfig is Config for the clients tests assert through: parallel tests poll through one
// client, which client-go's default rate (5 requests a second) would starve.
func (c *Cluster) ClientConfig() *rest.Config {
	cfg := rest.CopyConfig(c.Config)
	cfg.QPS, cfg.Burst = 200, 400
	return cfg
}
