package machine

import (
	"context"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rudder-operator/rudder/internal/helm"
	"github.com/rudder-operator/rudder/internal/records"
	"github.com/rudder-operator/rudder/internal/release"
	"github.com/rudder-operator/rudder/internal/watches"
)

// The state machine's boundaries with Helm and its storage, and with the values sources.

// SourceReader reads a CR's valuesFrom sources and keeps watching them for it
// (wiring.Sources).
type SourceReader interface {
	// Read returns what each source holds (nil: missing), as the scope's identity, and
	// records that the CR reads them, and no others.
	Read(ctx context.Context, scope helm.Scope, srcs []watches.Source, rdr SourceUser) ([][]byte, error)
	// Forget drops what the CR read.
	Forget(rdr SourceUser)
}

// Releases is everything the state machine asks of Helm and its storage, by what its steps
// need: read a release's revisions, run one action on it, prove and hand over ownership, write
// its records and objects. Every call acts as, and within, the scope it is given, and ends
// with its context: a pass's is cancelled when its CR is deleted or rudder stops, and whatever
// the call runs (a hook's wait above all) ends with it.
// helm.Client's views are the implementation (ReleasesOf); unit tests of the pass use
// helmtest.Memory's, Helm's own actions over its memory storage driver.
type Releases struct {
	History ReleaseHistory
	Actions ReleaseActions
	Owners  ReleaseOwners
	Records ReleaseRecords
	Objects ObjectWriter
}

// acting is the boundary as the actions hold it: all but History. The observer reads the
// release (observe, and again as each action leaves it); an action acts on what it is given
// and returns what it made, so that no decision rests on a read the observation does not hold.
type acting struct {
	Actions ReleaseActions
	Owners  ReleaseOwners
	Records ReleaseRecords
	Objects ObjectWriter
}

// acting is r without its reader.
func (r Releases) acting() acting {
	return acting{Actions: r.Actions, Owners: r.Owners, Records: r.Records, Objects: r.Objects}
}

// ReleasesOf is the boundary as hc implements it.
func ReleasesOf(hc *helm.Client) Releases {
	return Releases{History: hc.History, Actions: hc.Actions, Owners: hc.Owners, Records: hc.Records, Objects: hc.Objects}
}

// ReleaseHistory reads a release's revisions.
type ReleaseHistory interface {
	// Head is the newest revision as the manager's cache of release records shows it (nil,
	// nil: none there): no request, no decoding.
	Head(ctx context.Context, s helm.Scope, name string) (*records.Head, error)
	// Last is the newest revision (nil, nil: none).
	Last(ctx context.Context, s helm.Scope, name string) (*release.Release, error)
	// LastDeployed is the newest deployed revision older than before (nil, nil: none).
	LastDeployed(ctx context.Context, s helm.Scope, name string, before int) (*release.Release, error)
	// Revision is one revision (nil, nil: not in the history).
	Revision(ctx context.Context, s helm.Scope, name string, version int) (*release.Release, error)
}

// ReleaseActions runs Helm's actions on a release.
type ReleaseActions interface {
	// Install and Upgrade return the revision they made; an Install of a name that is taken
	// returns helm.ErrNameInUse and writes nothing.
	Install(ctx context.Context, req *helm.Request) (*release.Release, error)
	Upgrade(ctx context.Context, req *helm.Request) (*release.Release, error)
	// Rollback returns the revision it made.
	Rollback(ctx context.Context, s helm.Scope, req *helm.RollbackRequest) (*release.Release, error)
	Uninstall(ctx context.Context, s helm.Scope, name, description string) error
	// KeepFailed removes the objects of a failed install, the newest revision, and keeps its
	// record as the failure's (records.KeepFailed), with a history of at most maxHistory
	// revisions (0: every one), and returns it as kept (nil: the release is gone).
	KeepFailed(ctx context.Context, s helm.Scope, name string, maxHistory int) (*release.Release, error)
	// Test runs the newest revision's test hooks within timeout and returns the revision,
	// which says how each ran (helm.Tests); a failed test is an error too.
	Test(ctx context.Context, s helm.Scope, name string, timeout time.Duration) (*release.Release, error)
}

// ReleaseOwners proves, takes over and hands over releases and their objects.
type ReleaseOwners interface {
	// LetGo hands release name over, its records and objects kept, rudder's marks and the
	// owner's reference taken off them; it returns how many objects it changed.
	LetGo(ctx context.Context, s helm.Scope, name string) (int, error)
	// ProveForeign reads a release rudder did not make and the objects of its newest deployed
	// revision, and says whether they prove it is the scope's owner's (helm.Proof.Why "").
	ProveForeign(ctx context.Context, s helm.Scope, name string) (*helm.Proof, error)
	// AdoptForeign takes a proven release over: rudder's marks on the objects the proof read
	// (on the condition that they are as it read them), labels on every record.
	AdoptForeign(ctx context.Context, s helm.Scope, name string, p *helm.Proof, labels map[string]string) error
	// MarkRevision marks a revision of the CR's release that rudder's post-renderer did not
	// write (a person's helm upgrade), and its objects, as the CR's, on the proof
	// helm.MarkRevision reads; it returns the revision as marked and names the objects it
	// marked.
	MarkRevision(ctx context.Context, s helm.Scope, name string, version int) (*release.Release, []string, error)
}

// ReleaseRecords writes a release's records apart from an action.
type ReleaseRecords interface {
	// Unlock marks a pending revision failed, if storage still holds it pending, and returns
	// the revision as storage now holds it (records.Unlock).
	Unlock(ctx context.Context, s helm.Scope, rel *release.Release) (now *release.Release, unlocked bool, err error)
	// Supersede marks every deployed revision but the newest superseded and returns them.
	Supersede(ctx context.Context, s helm.Scope, name string) ([]int, error)
	// Relabel gives the release's records exactly the carried labels want among keys
	// (adoption by a shard).
	Relabel(ctx context.Context, s helm.Scope, name string, keys []string, want map[string]string) error
	// WriteFacts gives the record of revision version exactly the release's facts f (see
	// records.Facts): one patch of its labels.
	WriteFacts(ctx context.Context, s helm.Scope, name string, version int, f records.Facts) error
}

// ObjectWriter writes a release's objects.
type ObjectWriter interface {
	// Writer writes operands as the scope's identity (drift re-apply).
	Writer(s helm.Scope) (client.Client, error)
}

// SourceUser is a CR that reads values sources, with what queues it again: a change of a
// source it read calls Queue.SourceChanged (the Reconciler of its kind).
type SourceUser struct {
	Queue SourceQueue
	Key   types.NamespacedName
}

// SourceQueue takes again the CRs whose values sources changed.
type SourceQueue interface {
	SourceChanged(key types.NamespacedName)
}
