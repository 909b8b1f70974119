package helm

import (
	"context"
	"time"

	"helm.sh/helm/v4/pkg/kube"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/cli-runtime/pkg/resource"
	"k8s.io/client-go/rest"
)

// The kube client of an action: its type here, beneath the files of its changes (kubeclient.go,
// crds.go, force.go, apply.go, wait.go, unasked.go).

// kubeClient is Helm's kube client with these changes; every other method, and every optional
// interface Helm asserts (three-way merge, deletion propagation, …), is Helm's own.
//   - No reachability probe before every action (a GET /version each time): rudder's watches
//     depend on the API server anyway, and an unreachable one fails the action's first request
//     with an error that says so.
//   - Build of the action's own manifest creates the chart's templates/ CRDs first (crds.go),
//     and takes the post-renderer's objects instead of parsing the text again (see infos);
//     Helm's creates of those objects read only the metadata of the API server's answer (see
//     createClient).
//   - Client-side creates do not take Helm 4's process-wide lock (Create), and a client-side
//     install's creates answer Helm's existence check instead of a GET per object (unasked.go).
//   - upgrade.force replaces what an update cannot change (force.go).
//   - Waits end with the action's context and are scoped by the watch (the end of
//     kubeclient.go).
type kubeClient struct {
	*kube.Client
	getter *restClientGetter
	// post is the action's post-renderer, if it has one.
	post *postRenderer
	// clients are the REST clients infos made, per group version.
	clients map[schema.GroupVersion]createClient
	// force replaces the objects an upgrade cannot update (see Update), waiting up to timeout
	// for each deletion; replaced names those it replaced.
	force    bool
	timeout  time.Duration
	replaced []string
	// ctx is the action's: its waits (a CRD served, an object deleted) end with it.
	ctx context.Context
	// serverSide: the action applies its objects server-side, as the release's record or the
	// watch says (apply.go); else client-side, as Helm 3 did (see Create).
	serverSide bool
	// wait scopes what the action's waits for readiness look at (see wait.go).
	wait WaitPolicy
	// installing: the action is a first install (not one over a failed install); unasked, for
	// a client-side one, answers Helm's existence GETs before its creates, for the objects in
	// notAsked (unasked.go).
	installing bool
	unasked    unasked
	notAsked   map[*resource.Info]bool
}

// context is the action's context (Helm's KubeClient methods take none).
func (k *kubeClient) context() context.Context {
	if k.ctx == nil {
		return context.Background()
	}
	return k.ctx
}

// createClient is the REST client of the objects infos builds: cli-runtime's, except that the
// answer to a POST is read for its type and metadata only. cli-runtime's Helper POSTs only
// to create, and Helm reads of the created object only what Info.Refresh keeps (its name,
// namespace and resourceVersion); decoding the whole answer, the object as stored with its
// managedFields, into maps was most of what a create cost rudder. Every other verb (the GETs
// of an upgrade's three-way merge need the whole live object) is cli-runtime's.
type createClient struct {
	*rest.RESTClient
	post *rest.RESTClient
	// absent answers GETs while unasked is on (unasked.go); made only for a client-side first
	// install, the one action unasked is on for.
	absent  *rest.RESTClient
	unasked *unasked
}

func (c createClient) Post() *rest.Request { return c.post.Post() }

func (c createClient) Get() *rest.Request {
	if c.absent != nil && c.unasked.on.Load() {
		return c.absent.Get()
	}
	return c.RESTClient.Get()
}
