package wiring

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/cache"

	appv1 "github.com/rudder-operator/rudder/api/apps/v1"
	cnatv1alpha1 "github.com/rudder-operator/rudder/api/cnat/v1alpha1"
	operatorv1alpha1 "github.com/rudder-operator/rudder/api/operator/v1alpha1"
	rolloutv1 "github.com/rudder-operator/rudder/api/rollout/v1alpha1"
	"github.com/rudder-operator/rudder/controllers/application"
	"github.com/rudder-operator/rudder/controllers/at"
	"github.com/rudder-operator/rudder/internal/hook"
	"github.com/rudder-operator/rudder/internal/machine"
	"github.com/rudder-operator/rudder/internal/watches"
)

// What the manager is made from: the options main passes, completed with their defaults, the
// scheme of its clients and the built-in kinds' hooks, and what the caches of every file are
// narrowed by.

// ManagerOptions configure rudder. The zero value of each field is a sensible default, except
// WatchesFile.
type ManagerOptions struct {
	WatchesFile string
	// Watches, when set, are used instead of reading WatchesFile.
	Watches []*watches.Watch
	// WatchNamespaces limits every cache to these namespaces (empty: all).
	WatchNamespaces []string
	// WatchLabelSelector shards rudder (Flux's flag name): this replica serves only the CRs,
	// of every watched kind, whose labels the selector matches (on top of each watch's own
	// selector), and its caches hold only those CRs, their release records and their
	// operands. "" serves every CR.
	WatchLabelSelector string

	MetricsBindAddress string // "0" disables
	// MetricsSecure serves metrics over HTTPS to clients that authenticate (TokenReview) and
	// may get /metrics (SubjectAccessReview), as kubebuilder scaffolds it.
	MetricsSecure          bool
	HealthProbeBindAddress string // "0" disables
	// PprofBindAddress serves net/http/pprof there ("" or "0": off, the default).
	PprofBindAddress string
	LeaderElection   bool
	// LeaderElectionID names the Lease; "" derives it from WatchLabelSelector, so that each
	// shard elects its own leader.
	LeaderElectionID string
	LeaderElectionNS string

	MaxConcurrentReconciles int
	ReconcilePeriod         time.Duration
	// RenderMemoryBudget bounds the sum of the memory bounds of the renders running at once
	// (render.Options.MemoryBudget; 0: none but each render's own).
	RenderMemoryBudget int64

	// DefaultServiceAccount is impersonated, in each CR's namespace, for the releases of
	// watches that name no serviceAccountName ("" = rudder's own identity).
	DefaultServiceAccount string

	ChartReload   bool
	ChartDebounce time.Duration
	ChartRescan   time.Duration

	// Clock for the hooks and reconcilers (tests inject a fake one).
	Clock clock.PassiveClock
	// OnPass is each Reconciler's (see Options.OnPass).
	OnPass func(gvk schema.GroupVersionKind, cr *unstructured.Unstructured)
	// SeveralManagers allows more than one rudder manager in a process (tests): controller
	// names, which name their metrics, are then not checked for uniqueness.
	SeveralManagers bool
	// Hooks replaces the built-in hook registry (nil: the built-in kinds' hooks).
	Hooks *hook.Registry
}

// watchesAndShard are the watches (given, or loaded from WatchesFile) and the shard selector.
func (o *ManagerOptions) watchesAndShard() ([]*watches.Watch, labels.Selector, error) {
	ws := o.Watches
	if ws == nil {
		var err error
		if ws, err = watches.Load(o.WatchesFile); err != nil {
			return nil, nil, err
		}
	}
	shard, err := labels.Parse(o.WatchLabelSelector)
	if err != nil {
		return nil, nil, fmt.Errorf("--watch-label-selector %q: %w", o.WatchLabelSelector, err)
	}
	return ws, shard, nil
}

func (o *ManagerOptions) defaults(shard labels.Selector) {
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	if o.Hooks == nil {
		o.Hooks = BuiltinHooks(o.Clock)
	}
	if o.MetricsBindAddress == "" {
		o.MetricsBindAddress = "0"
	}
	if o.HealthProbeBindAddress == "" {
		o.HealthProbeBindAddress = "0"
	}
	if o.LeaderElectionID == "" {
		o.LeaderElectionID = LeaderElectionID(shard)
	}
}

// cacheNamespaces is the caches' namespaces (nil: all).
func (o *ManagerOptions) cacheNamespaces() map[string]cache.Config {
	if len(o.WatchNamespaces) == 0 {
		return nil
	}
	namespaces := map[string]cache.Config{}
	for _, ns := range o.WatchNamespaces {
		namespaces[ns] = cache.Config{}
	}
	return namespaces
}

// narrowed is sel with the shard's requirements added.
func narrowed(sel, shard labels.Selector) labels.Selector {
	reqs, _ := shard.Requirements()
	return sel.Add(reqs...)
}

// selectorKeys are the label keys a selector names, sorted.
func selectorKeys(sel labels.Selector) []string {
	reqs, _ := sel.Requirements()
	keys := make([]string, 0, len(reqs))
	for _, r := range reqs {
		if !slices.Contains(keys, r.Key()) {
			keys = append(keys, r.Key())
		}
	}
	sort.Strings(keys)
	return keys
}

// stripCR is what the CR cache keeps: machine.Compact, and not kubectl's
// last-applied-configuration annotation, a copy of the CR as last applied (its whole spec
// again). rudder writes CRs only with patches, which leave the annotation alone.
func stripCR(in any) (any, error) {
	if u, ok := in.(*unstructured.Unstructured); ok {
		if ann, ok, _ := unstructured.NestedFieldNoCopy(u.Object, "metadata", "annotations"); ok {
			if m, ok := ann.(map[string]any); ok {
				delete(m, corev1.LastAppliedConfigAnnotation)
			}
		}
	}
	return machine.Compact(in)
}

// BuiltinHooks are the Go hooks of the built-in kinds (At, Application).
func BuiltinHooks(c clock.PassiveClock) *hook.Registry {
	r := hook.NewRegistry()
	at.Register(r, c)
	application.Register(r)
	return r
}

// LeaderElectionID is the Lease name of the shard that serves the CRs shard selects:
// rudder.rudder.dev when unsharded, else one derived from the selector, so that the replicas of
// one shard elect one leader and shards do not contend.
func LeaderElectionID(shard labels.Selector) string {
	if shard.Empty() {
		return "rudder.rudder.dev"
	}
	sum := sha256.Sum256([]byte(shard.String()))
	return "rudder-" + hex.EncodeToString(sum[:])[:10] + ".rudder.dev"
}

// Scheme knows the built-in kinds and client-go's types.
func Scheme() *runtime.Scheme {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{
		clientgoscheme.AddToScheme, rolloutv1.AddToScheme, operatorv1alpha1.AddToScheme, cnatv1alpha1.AddToScheme, appv1.AddToScheme,
	} {
		if err := add(s); err != nil {
			panic(err) // static registration; cannot fail at run time
		}
	}
	return s
}
