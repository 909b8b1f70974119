// Command devcluster runs rudder's local control plane (etcd, kube-apiserver,
// kube-controller-manager, kube-scheduler, kwok) in the foreground until SIGINT/SIGTERM, for
// `make dev-cluster` and `make demo`. It writes <dir>/kubeconfig, then <dir>/ready.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/rudder-operator/rudder/internal/testcluster"
)

func main() {
	dir := flag.String("dir", "bin/dev", "Directory for the kubeconfig, state and component logs.")
	flag.Parse()
	abs, err := filepath.Abs(*dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	_ = os.Remove(filepath.Join(abs, "ready"))
	opts := testcluster.All()
	opts.Dir, opts.KeepDir = abs, true
	opts.PodCompleteAfter = 3 * time.Second
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	c, err := testcluster.Start(ctx, opts)
	if err != nil {
		fmt.Fprintln(os.Stderr, "devcluster:", err)
		os.Exit(1)
	}
	if err := os.WriteFile(filepath.Join(abs, "ready"), []byte(c.Kubeconfig+"\n"), 0o644); err != nil {
		fmt.Fprintln(os.Stderr, err)
	}
	fmt.Println("devcluster: ready; kubeconfig", c.Kubeconfig)
	<-ctx.Done()
	_ = os.Remove(filepath.Join(abs, "ready"))
	if err := c.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, "devcluster:", err)
		os.Exit(1)
	}
}
