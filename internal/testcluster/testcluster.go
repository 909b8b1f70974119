package testcluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

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
	api, err := c.startControlPlane()
	if err != nil {
		return nil, err
	}
	ok := false
	defer func() {
		if !ok {
			_ = c.Stop()
		}
	}()
	if err := c.addAdmin(); err != nil {
		return nil, err
	}
	if opts.ControllerManager {
		if err := c.startControllerManager(api); err != nil {
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

// startControlPlane starts etcd and kube-apiserver through envtest, and installs the CRDs.
func (c *Cluster) startControlPlane() (*envtest.APIServer, error) {
	env := &envtest.Environment{
		BinaryAssetsDirectory:   c.binDir,
		CRDDirectoryPaths:       c.opts.CRDDirectoryPaths,
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
		return nil, fmt.Errorf("starting etcd and kube-apiserver from %s: %w (logs in %s)", c.binDir, err, c.Dir)
	}
	c.Config = cfg
	return api, nil
}

// addAdmin makes the cluster-admin user that Config and Kubeconfig act as.
func (c *Cluster) addAdmin() error {
	admin, err := c.env.AddUser(envtest.User{Name: "rudder-admin", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		return err
	}
	c.Config = admin.Config()
	kc, err := admin.KubeConfig()
	if err != nil {
		return err
	}
	c.Kubeconfig = filepath.Join(c.Dir, "kubeconfig")
	return os.WriteFile(c.Kubeconfig, kc, 0o600)
}

func (c *Cluster) startControllerManager(api *envtest.APIServer) error {
	caFile := filepath.Join(c.Dir, "apiserver-ca.crt")
	if err := os.WriteFile(caFile, api.CA, 0o600); err != nil {
		return err
	}
	return c.start("kube-controller-manager",
		"--kubeconfig="+c.Kubeconfig,
		"--authentication-kubeconfig="+c.Kubeconfig,
		"--authorization-kubeconfig="+c.Kubeconfig,
		"--service-account-private-key-file="+filepath.Join(api.CertDir, "sa-signer.key"),
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
	)
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

// ClientConfig is Config for the clients tests assert through: parallel tests poll through one
// client, which client-go's default rate (5 requests a second) would starve.
func (c *Cluster) ClientConfig() *rest.Config {
	cfg := rest.CopyConfig(c.Config)
	cfg.QPS, cfg.Burst = 200, 400
	return cfg
}
