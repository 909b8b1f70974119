package testcluster

import (
	_ "embed"
	"os"
	"os/exec"
	"sync"
	"time"

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
