package helm

import (
	"fmt"

	"helm.sh/helm/v4/pkg/kube"
)

// How a release's objects are applied. Every release Helm 3 or an earlier rudder made applies
// client-side (Helm 3's three-way merge), and keeps doing so unless its watch says otherwise:
// a watch opts in to server-side apply for new releases (ApplyPolicy.Install) and moves its
// existing releases on their next upgrade (ApplyPolicy.Upgrade "true"). Upgrades and rollbacks
// otherwise follow the method the release recorded (Helm 4's apply_method), as `helm upgrade
// --server-side=auto` does. The field shape is Flux's helm-controller's.

// FieldManager is the field manager of every write rudder makes to a release's objects:
// client-side creates and updates, server-side applies, drift restores. It is "helm", the
// name both Helm CLIs pin (kube.ManagedFieldsManager in their cmd/helm), because a release
// has one owner of its fields, whoever acts on it: a person's `helm rollback` or `helm
// upgrade` of a release that applies server-side then applies as the manager that holds its
// fields, and conflicts only with the fields another manager (kubectl, an HPA, a controller)
// holds — which is what server-side apply's ownership is for. One name for both methods is
// also what lets Helm move a client-side release's fields to server-side apply (its
// managed-fields migration, client-go's csaupgrade): the entries it moves are this
// manager's, written by rudder or by Helm 3's CLI alike. (rudder wrote as legacyFieldManager
// before; see fieldowner.go.)
const FieldManager = "helm"

func init() {
	// Helm's kube client names its writes with this package variable (else the program's
	// name, which is a test binary's in tests).
	kube.ManagedFieldsManager = FieldManager
}

// What ApplyPolicy.Upgrade may say: Helm's `--server-side` values.
const (
	ApplyAuto   = "auto"
	ApplyServer = "true"
	ApplyClient = "false"
)

// ApplyPolicy is a watch's choice of apply method.
type ApplyPolicy struct {
	// Install: a new release is applied server-side, as FieldManager (default: client-side,
	// as Helm 3 applied and the previous rudder can take back).
	Install bool
	// Upgrade is ApplyAuto ("" too: the method the release recorded), ApplyServer (client-side
	// releases move to server-side apply, their fields migrated to FieldManager's apply) or
	// ApplyClient.
	Upgrade string
	// ForceConflicts: a server-side apply takes the fields of the manifest that another
	// manager holds ("Overwrite value, become sole manager"); else such an apply fails with
	// the conflict, which the CR's Ready condition reports. A drift restore always takes them:
	// restoring them is what it is for.
	ForceConflicts bool
	// TakeOwnership: an object the release renders that exists outside any release, and claims
	// the release's CR (guard.AnnotationValuesFor), is taken into the release (see take.go).
	TakeOwnership bool
}

// CheckUpgrade says what is wrong with an Upgrade value.
func CheckUpgrade(mode string) error {
	switch mode {
	case "", ApplyAuto, ApplyServer, ApplyClient:
		return nil
	}
	return fmt.Errorf("%q must be %s, %s or %s", mode, ApplyAuto, ApplyServer, ApplyClient)
}

// upgrade is the Upgrade value Helm's upgrade takes.
func (p ApplyPolicy) upgrade() string {
	if p.Upgrade == "" {
		return ApplyAuto
	}
	return p.Upgrade
}

// upgradesServerSide reports whether an upgrade of a release whose newest revision applied
// server-side when recorded is true applies server-side: Helm's own decision
// (getUpgradeServerSideValue), which Create follows (see kubeClient.serverSide).
func (p ApplyPolicy) upgradesServerSide(recorded bool) bool {
	switch p.Upgrade {
	case ApplyServer:
		return true
	case ApplyClient:
		return false
	}
	return recorded
}
