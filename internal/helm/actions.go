package helm

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/http"

	"helm.sh/helm/v4/pkg/action"
	"helm.sh/helm/v4/pkg/chart/common"
	chart "helm.sh/helm/v4/pkg/chart/v2"
	"helm.sh/helm/v4/pkg/kube"
	rcommon "helm.sh/helm/v4/pkg/release/common"
	release "helm.sh/helm/v4/pkg/release/v1"
	"helm.sh/helm/v4/pkg/storage/driver"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rudder-operator/rudder/internal/guard"
	"github.com/rudder-operator/rudder/internal/libtext"
	"github.com/rudder-operator/rudder/internal/records"
	view "github.com/rudder-operator/rudder/internal/release"
)

// ErrNameInUse: Install found a release of that name in storage and wrote nothing.
var ErrNameInUse = errors.New("a release of that name exists")

// InstallResult is the error of an install (nil: none), wrapping ErrNameInUse when Helm found
// the name taken: either by its own look at storage, or — when that look read nothing (Helm
// goes on when its read fails) — by storing revision 1 and finding it there.
func InstallResult(err error) error {
	if err != nil && (errors.Is(err, driver.ErrReleaseExists) || libtext.HelmNameInUse(err)) {
		return fmt.Errorf("%w: %w", ErrNameInUse, err)
	}
	return err
}

// Install installs a new release. It does not wait for readiness: the reconciler reports it.
// When storage already holds a release of that name (Helm checks before it writes anything),
// the error wraps ErrNameInUse and nothing was changed — unless req.Replace and its newest
// revision is failed or uninstalled (a kept failed install): Helm's replace then stores the
// install as the revision after it, and leaves a failed one as it is.
//
// Nothing of a release that breaks its confinement is applied: the chart's crds/ are checked
// before anything else; a chart with crds/ (which Helm creates before it renders) or with hooks
// is rendered and checked first without the cluster, before any request; and the real render's
// manifest and hooks are checked again before the first revision is stored.
func (a *Actions) Install(ctx context.Context, req *Request) (*view.Release, error) {
	c := a.core
	crds := len(req.Chart.CRDObjects()) > 0 && req.CRDs.Install != CRDsSkip
	if crds {
		if err := req.Scope.CheckCRDs(c.mapper, req.Chart); err != nil {
			return nil, err
		}
	}
	if crds || hasHooks(req.Chart) {
		if err := a.render.precheck(ctx, req); err != nil {
			return nil, err
		}
	}
	revision := 1
	if req.Replace {
		var err error
		if revision, err = a.nextRevision(ctx, req); err != nil {
			return nil, err
		}
	}
	r, err := c.begin(ctx, req.scope(), storing{chart: req.Chart, spec: records.ActionInstall, facts: req.Facts,
		failedFacts: req.FailedFacts, carried: req.Carried, record: req.Chart, revision: revision, query: records.QueryInstall})
	if err != nil {
		return nil, err
	}
	r.kube.ctx, r.kube.installing = ctx, !req.Replace // a first install's creates answer Helm's check (unasked.go)
	if err := a.applyCRDs(r, req, cmp.Or(req.CRDs.Install, CRDsCreate)); err != nil {
		return nil, err
	}
	rendered, err := a.render.renderFor(ctx, r, req, common.ReleaseOptions{Name: req.ReleaseName, Namespace: req.Scope.Namespace,
		Revision: revision, IsInstall: true})
	if err != nil {
		return nil, err
	}
	if err := a.takeOwnership(ctx, req); err != nil {
		return nil, err
	}
	in := action.NewInstall(r.conf)
	in.SkipCRDs = true // applied above, marked as the release's
	in.Timeout = req.Scope.Limits.Timeout()
	in.SkipSchemaValidation = true // validated by the render
	in.ReleaseName = req.ReleaseName
	in.Replace = req.Replace
	in.Namespace = req.Scope.Namespace
	in.Labels = req.Labels()
	in.Description = req.Description
	in.DisableOpenAPIValidation = skipClientValidation
	helm3(in)
	in.WaitStrategy, in.WaitForJobs = req.Scope.Wait.strategy(), req.Scope.Wait.Jobs
	if req.Scope.Apply.Install {
		in.ServerSideApply, in.ForceConflicts = true, req.Scope.Apply.ForceConflicts
		r.kube.serverSide = true
	}
	rel, err := records.V1Of(in.RunWithContext(ctx, rendered, req.Values))
	err = r.heldBy(ctx, c.mapper, err)
	r.made(req, rel, err)
	if err = InstallResult(r.result(err)); errors.Is(err, ErrNameInUse) {
		return nil, err
	}
	return View(rel), err
}

// nextRevision is the number of the revision an upgrade or a replacing install makes:
// req.Revision, else the newest one's in storage plus one.
func (a *Actions) nextRevision(ctx context.Context, req *Request) (int, error) {
	if req.Revision != 0 {
		return req.Revision, nil
	}
	last, err := a.history.Last(ctx, req.Scope, req.ReleaseName)
	if err != nil || last == nil {
		return 0, fmt.Errorf("reading the revision to make %s's next over: %w", req.ReleaseName, cmp.Or(err, driver.ErrReleaseNotFound))
	}
	return last.Version + 1, nil
}

// applyCRDs applies the chart's crds/ as mode says (see crdClient.applyCRDs), recording what it
// did in req.CRDsApplied; the cluster's capabilities are read again after.
func (a *Actions) applyCRDs(r *run, req *Request, mode CRDMode) error {
	c := a.core
	req.CRDsApplied = nil
	if mode == CRDsSkip || len(req.Chart.CRDObjects()) == 0 {
		return nil
	}
	did, err := crdClient{r.kube}.applyCRDs(req.Chart, mode, guard.OwnerOf(req.Scope.Owner))
	req.CRDsApplied = did
	if err != nil {
		return r.result(err)
	}
	// The render sees the versions just served, as after Helm's own install of crds/.
	c.forgetCapabilities()
	caps, err := c.capabilities()
	if err != nil {
		return err
	}
	r.conf.Capabilities = caps
	return nil
}

// precheck renders a release without the cluster (lookups find nothing) and checks its
// manifest and hooks before the action's first request: Helm sees a chart's hooks only once it
// has rendered, and creates crds/ before it renders. Only a violation counts: a render that
// needs the cluster fails again, and says why, in the action. Charts without hooks or crds/
// need no second render: their manifest is checked by the post-renderer, before any request.
func (rd *renderer) precheck(ctx context.Context, req *Request) error {
	_, err := rd.renderOffline(ctx, req)
	var ce *guard.ConfinementError
	if errors.As(err, &ce) || ctx.Err() != nil {
		return err
	}
	return nil
}

// renderOffline renders a release as Install would, without the cluster: lookups find nothing,
// and the capabilities are the cluster's when the Client has read them, else Helm's defaults.
func (rd *renderer) renderOffline(ctx context.Context, req *Request) (*release.Release, error) {
	c := rd.core
	return renderOffline(ctx, c.pool, req, c.mapper, c.known(), c.chartOwn)
}

// renderFor renders the chart of an install or upgrade of run r on a worker, with the
// cluster's capabilities and the run's lookups.
func (rd *renderer) renderFor(ctx context.Context, r *run, req *Request, opts common.ReleaseOptions) (*chart.Chart, error) {
	c := rd.core
	up, lk, err := rd.upstream(r)
	if err != nil {
		return nil, err
	}
	own := newChartOwn(ctx, c.pool, r.conf.Capabilities, req, c.chartOwn)
	rendered, err := renderChart(ctx, c.pool, c.mapper, req, opts, r.conf.Capabilities, up, r.references(ctx, c.mapper), own,
		r.postRenderer(req, c.mapper))
	over, withheld := lk.Outcome()
	req.Withheld = withheld
	if over {
		return nil, limitError(guard.LimitLookups, int64(req.Scope.Limits.lookups()), "the render makes more lookups than that")
	}
	if err != nil {
		return nil, r.result(err)
	}
	return rendered, nil
}

// skipClientValidation turns off Helm's client-side "OpenAPI validation". Against an API server
// with server-side field validation (GA since Kubernetes 1.27) kubectl's validator validates
// nothing on the client: it only asks whether the server supports the fieldValidation
// parameter, and answers that by fetching and parsing the group's whole OpenAPI v3 document on
// every install and upgrade — most of rudder's CPU per release action when it was on. The API
// server still validates every object Helm creates or patches.
const skipClientValidation = true

// Upgrade makes a new revision of an existing release. Helm never touches crds/ on upgrade;
// req.CRDs.Upgrade may (see applyCRDs). With req.Force, the objects whose update the API
// server refuses as immutable are replaced (see kubeClient.Update). A chart with hooks is
// checked first as Install does.
func (a *Actions) Upgrade(ctx context.Context, req *Request) (*view.Release, error) {
	c := a.core
	mode := cmp.Or(req.CRDs.Upgrade, CRDsSkip)
	if mode != CRDsSkip && len(req.Chart.CRDObjects()) > 0 {
		if err := req.Scope.CheckCRDs(c.mapper, req.Chart); err != nil {
			return nil, err
		}
	}
	if hasHooks(req.Chart) {
		if err := a.render.precheck(ctx, req); err != nil {
			return nil, err
		}
	}
	revision, err := a.nextRevision(ctx, req)
	if err != nil {
		return nil, err
	}
	r, err := c.begin(ctx, req.scope(), storing{chart: req.Chart, spec: records.ActionUpgrade, facts: req.Facts,
		failedFacts: req.FailedFacts, carried: req.Carried, record: req.Chart, revision: revision, query: records.QueryUpgrade})
	if err != nil {
		return nil, err
	}
	r.kube.ctx = ctx
	if err := a.applyCRDs(r, req, mode); err != nil {
		return nil, err
	}
	rendered, err := a.render.renderFor(ctx, r, req, common.ReleaseOptions{Name: req.ReleaseName, Namespace: req.Scope.Namespace,
		Revision: revision, IsUpgrade: true})
	if err == nil {
		err = a.takeOwnership(ctx, req)
	}
	if err != nil {
		return nil, err
	}
	r.kube.force, r.kube.timeout = req.Force, req.Scope.Limits.Timeout()
	up := action.NewUpgrade(r.conf)
	up.Timeout = req.Scope.Limits.Timeout()
	up.SkipSchemaValidation = true // validated by the render
	up.Namespace = req.Scope.Namespace
	up.Labels = req.Labels()
	up.Description = req.Description
	up.MaxHistory = req.MaxHistory
	up.DisableOpenAPIValidation = skipClientValidation
	up.WaitStrategy = req.Scope.Wait.strategy()
	up.WaitForJobs = req.Scope.Wait.Jobs
	// The release's recorded apply method (client-side for every record Helm 3 wrote), unless
	// the watch moves it: Helm migrates the fields of a client-side release it moves to
	// server-side apply.
	up.ServerSideApply = req.Scope.Apply.upgrade()
	r.kube.serverSide = req.Scope.Apply.upgradesServerSide(r.appliesServerSide(req.ReleaseName, 0))
	up.ForceConflicts = r.kube.serverSide && req.Scope.Apply.ForceConflicts
	rel, err := records.V1Of(up.RunWithContext(ctx, req.ReleaseName, rendered, req.Values))
	err = r.heldBy(ctx, c.mapper, err)
	req.Replaced = r.kube.replaced
	r.settle(req.ReleaseName, err)
	r.made(req, rel, err)
	return View(rel), r.result(err)
}

// RollbackRequest is a rollback of release Name to revision To.
type RollbackRequest struct {
	Name       string
	To         int
	MaxHistory int
	// Description describes the new revision (Helm's "Rollback to N" when empty).
	Description string
	// Force replaces the objects whose update the API server refuses as immutable, as an
	// upgrade with Request.Force does: the rollback of a forced upgrade changes them back.
	Force bool

	// Replaced is filled in by Rollback: the objects Force replaced.
	Replaced []string
}

// Rollback returns a release to revision req.To, as a new revision. The target's manifest and
// hooks are checked against the scope before anything is stored or applied: the watch's
// confinement may be stricter than when that revision was made. The new revision is marked
// as rudder's rollback (LabelRollbackRevision). It returns the revision it made.
func (a *Actions) Rollback(ctx context.Context, s Scope, req *RollbackRequest) (*view.Release, error) {
	c := a.core
	r, err := c.begin(ctx, s, storing{manifest: true, description: req.Description, rollback: true})
	if err != nil {
		return nil, err
	}
	r.kube.force, r.kube.timeout = req.Force, s.Limits.Timeout()
	rb := action.NewRollback(r.conf)
	rb.Timeout = s.Limits.Timeout()
	rb.Version = req.To
	rb.MaxHistory = req.MaxHistory
	rb.WaitStrategy, rb.WaitForJobs, rb.ServerSideApply = s.Wait.strategy(), s.Wait.Jobs, ApplyAuto
	r.kube.serverSide = r.appliesServerSide(req.Name, req.To)
	rb.ForceConflicts = r.kube.serverSide && s.Apply.ForceConflicts
	err = rb.Run(req.Name)
	req.Replaced = r.kube.replaced
	r.settle(req.Name, err)
	if err := r.result(err); err != nil {
		return nil, err
	}
	// Helm's rollback returns no revision: the one it made is the newest.
	made, err := a.history.Last(ctx, s, req.Name)
	if err == nil && made == nil {
		err = fmt.Errorf("release %s has no revision after its rollback", req.Name)
	}
	return made, err
}

// Uninstall removes a release and the objects it made. A release that is already gone is not
// an error. A release whose manifest or hooks are outside the scope (made before a stricter
// watch) is refused before anything runs: its delete hooks and deletions would act there.
func (a *Actions) Uninstall(ctx context.Context, s Scope, name, description string) error {
	_, err := a.uninstall(ctx, s, name, description, nil)
	return err
}

// KeepFailed removes the objects of a failed install, the release's newest revision, as
// Uninstall does, and keeps its record as the failure's (records.KeepFailed): Helm's uninstall
// keeps the history, and the record is marked failed again with the description Helm gave the
// failure. An Install with Request.Replace makes the next revision over it. Of the failed
// installs kept before, the oldest go so that the history holds at most maxHistory revisions.
// A keep that died after the uninstall (the newest revision uninstalled) is finished. A newest
// revision in any other state is refused, unchanged. It returns the revision as kept (nil: the
// release is gone).
func (a *Actions) KeepFailed(ctx context.Context, s Scope, name string, maxHistory int) (*view.Release, error) {
	return a.uninstall(ctx, s, name, "", &keeping{maxHistory: maxHistory})
}

// keeping is how KeepFailed keeps a failed install's record: with a history of at most
// maxHistory revisions (0: every one).
type keeping struct{ maxHistory int }

// uninstall is Uninstall, or KeepFailed when keep is set.
func (a *Actions) uninstall(ctx context.Context, s Scope, name, description string, keep *keeping) (*view.Release, error) {
	c := a.core
	r, err := c.begin(ctx, s, storing{manifest: true})
	if err != nil {
		return nil, err
	}
	last, err := records.V1Of(r.conf.Releases.Last(name))
	if errors.Is(err, driver.ErrReleaseNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, r.result(err)
	}
	if err := s.CheckRelease(c.mapper, last, nil, true); err != nil {
		return nil, err
	}
	if keep != nil {
		switch last.Info.Status {
		case rcommon.StatusUninstalled:
			// A keep that died after Helm's uninstall removed the objects, before it marked
			// the record: Helm's uninstall of an uninstalled release kept in the history is
			// refused, and there is nothing left to remove.
			kept, err := records.KeepFailed(r.conf.Releases, name, last.Version, last.Info.Description, keep.maxHistory)
			return View(kept), r.result(err)
		case rcommon.StatusFailed:
		default:
			return nil, fmt.Errorf("revision %d of %s is %s: only a failed install is kept", last.Version, name, last.Info.Status)
		}
		description = last.Info.Description
	}
	if err := r.beforeUninstall(ctx, c.mapper, last); err != nil {
		return nil, err
	}
	un := action.NewUninstall(r.conf)
	un.Description = description
	un.Timeout = s.Limits.Timeout()
	un.WaitStrategy = kube.HookOnlyStrategy
	un.KeepHistory = keep != nil
	_, err = un.Run(name)
	if errors.Is(err, driver.ErrReleaseNotFound) {
		return nil, nil
	}
	if err == nil {
		err = r.deleteKeptHooks(ctx, c.mapper, last)
	}
	var kept *release.Release
	if err == nil && keep != nil {
		kept, err = records.KeepFailed(r.conf.Releases, name, last.Version, description, keep.maxHistory)
	}
	return View(kept), r.result(err)
}

// Writer is the client that re-applies a scope's drifted objects and relabels them for a
// shard: as the scope's identity, through a guard of its own, so that it reaches only what the
// release made, in its confinement (see internal/guard, ownership.go), as FieldManager. The
// connections are shared per (namespace, ServiceAccount).
func (ob *Objects) Writer(s Scope) (client.Client, error) { return ob.core.writer(s) }

// writer is Objects.Writer, which letting go writes with too.
func (c *core) writer(s Scope) (client.Client, error) {
	hc, err := c.httpClient(s)
	if err != nil {
		return nil, err
	}
	g := guard.New(context.Background(), s.Confinement, c.mapper, c.prefix, guard.OwnerOf(s.Owner))
	guarded := &http.Client{Transport: g.Wrap(hc.Transport), Timeout: hc.Timeout}
	w, err := client.New(c.restConfig(s), client.Options{Scheme: c.scheme, Mapper: c.mapper, HTTPClient: guarded})
	return client.WithFieldOwner(w, FieldManager), err
}
