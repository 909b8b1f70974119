package faults_test

import (
	"context"
	"fmt"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/rudder-operator/rudder/internal/crtest"
	"github.com/rudder-operator/rudder/internal/wiring"
)

// stopBound is rudder's: its graceful shutdown and a few seconds to exit (main.go).
const stopBound = wiring.GracefulShutdown + 5*time.Second

// TestSIGTERMStopsWithinTheBound: rudder told to stop exits within its bound whatever it is
// doing — before its caches sync, while they sync, serving, with the API server gone — and
// never needs a SIGKILL.
func TestSIGTERMStopsWithinTheBound(t *testing.T) {
	crtest.NeedsCluster(t)
	stop := func(t *testing.T, r *replica) {
		t.Helper()
		start := time.Now()
		if err := r.cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		select {
		case <-r.done:
			t.Logf("exited %s after SIGTERM (code %d)", time.Since(start).Round(time.Millisecond), r.cmd.ProcessState.ExitCode())
		case <-time.After(stopBound + 3*time.Second):
			t.Fatalf("still running %s after SIGTERM:\n%s", time.Since(start).Round(time.Second), tail(r.logs()))
		}
	}
	for _, after := range []time.Duration{0, 100 * time.Millisecond, 300 * time.Millisecond, time.Second, 2 * time.Second} {
		t.Run(fmt.Sprintf("%s after start", after), func(t *testing.T) {
			r := start(t, "stop")
			time.Sleep(after) // the moment of the signal, not a wait for an outcome
			stop(t, r)
		})
	}
	// serving is a rudder that has brought a CR to Ready.
	serving := func(t *testing.T, name string) *replica {
		r := start(t, name)
		ns := crtest.NewNamespace(t, k8s, "stop-")
		createWeb(t, ns, "w", "", 1)
		crtest.WaitCondition(t, k8s, webGVK, ns, "w", "Ready", metav1.ConditionTrue, "", time.Minute)
		return r
	}
	t.Run("serving", func(t *testing.T) { stop(t, serving(t, "stop-serving")) })
	t.Run("API server down", func(t *testing.T) {
		r := serving(t, "stop-apiserver")
		restarted := make(chan error, 1)
		go func() { restarted <- cluster.KillAndRestart(context.Background(), "kube-apiserver", 15*time.Second) }()
		crtest.Eventually(t, "the API server to be down", 30*time.Second, func(ctx context.Context) (bool, error) {
			ctx, cancel := context.WithTimeout(ctx, time.Second)
			defer cancel()
			return k8s.List(ctx, &corev1.NamespaceList{}) != nil, nil
		})
		stop(t, r)
		if err := <-restarted; err != nil {
			t.Fatal(err)
		}
	})
}
