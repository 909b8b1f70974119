package records

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
)

// Labels rudder puts on every release it makes (Helm stores them on the release Secret).
// RecordPrefix starts the name of every record Helm's Secret and ConfigMap drivers store.
const RecordPrefix = "sh.helm.release.v1."

// RecordType is the type of the Secrets Helm's storage driver writes.
const RecordType = "helm.sh/release.v1"

// LabelPrefix is the prefix of every label rudder puts on a record (its facts) or an object.
const LabelPrefix = "rudder.dev/"

const (
	// LabelOwnerUID ties a release to exactly one CR; a release without it, or with another
	// UID, is never taken over.
	LabelOwnerUID = "rudder.dev/owner-uid"
	// LabelOwnerKind is Kind.group of the owning CR (shortened with a hash when too long).
	LabelOwnerKind = "rudder.dev/owner-kind"
	// LabelChartDigest and LabelValuesDigest say what the revision was made from; when both
	// match the desired ones and the release is deployed, nothing needs rendering.
	LabelChartDigest  = "rudder.dev/chart-digest"
	LabelValuesDigest = "rudder.dev/values-digest"
	// LabelRevision is the revision number rudder stored a record it made from a spec as. Helm's
	// rollback copies a revision's labels, so on a rollback it names the revision returned to,
	// and differs from the record's own number.
	LabelRevision = "rudder.dev/revision"
	// LabelRollbackRevision is the revision number rudder stored a rollback it made as (an
	// automatic one after a failed upgrade, or one rudder.dev/rollback-to asked for). A record
	// copied from it (a later helm rollback to it) carries another number: only rudder's own
	// rollback records carry their own.
	LabelRollbackRevision = "rudder.dev/rollback-revision"
	// LabelAction is the action rudder made a revision from a spec with (see Action). A
	// rollback copies it with LabelRevision, which then names another number: it describes the
	// revision copied, not the copy (see Head.MadeBy). Records rudder made before af27a7e
	// (2026-12-02) lack it; what reads it falls back on the CR's condition until no release's
	// newest revision is that old.
	LabelAction = "rudder.dev/action"
	// LabelTestedRevision and LabelTestResult record a run of a revision's tests on its record
	// (Helm updates the record with how each test hook ran): the revision's own number and
	// TestSucceeded or TestFailed. A rollback copies them too, with the number of the
	// revision copied.
	LabelTestedRevision = "rudder.dev/tested-revision"
	LabelTestResult     = "rudder.dev/test-result"
	// LabelTestedAt is when that run ended, in Unix seconds (the last test hook's completion,
	// as Helm recorded it): a watch's test.interval runs the tests again that long after.
	LabelTestedAt = "rudder.dev/tested-at"
	// LabelObjectsRemoved is the number of a failed install's revision whose objects were
	// removed, its record kept as the failure's: Helm's install replaces it (Install.Replace),
	// as the next revision, while rudder holds the failed (chart, values) back. A rollback
	// copies it with the other labels, with the number of the revision copied.
	LabelObjectsRemoved = "rudder.dev/objects-removed"

	// LabelManaged marks every object a release renders, so that rudder's dependent cache
	// holds only its own operands.
	LabelManaged = "rudder.dev/managed"
	// AnnotationOwner on every rendered object names the owning CR
	// (group/Kind/namespace/name), for objects an owner reference cannot point from.
	AnnotationOwner = "rudder.dev/owner"
)

// digestLen is how many hex digits of a sha256 go into a label value (max 63 characters).
const digestLen = 40

// LabelDigest is the form of a "sha256:<hex>" (or bare hex) digest that release labels carry:
// its first 40 hex digits, which fit in a label value.
func LabelDigest(d string) string {
	d = strings.TrimPrefix(d, "sha256:")
	if len(d) > digestLen {
		d = d[:digestLen]
	}
	return d
}

// DisplayDigest is the 12-hex-digit form of a digest that messages and descriptions show.
func DisplayDigest(d string) string {
	d = strings.TrimPrefix(d, "sha256:")
	if len(d) > 12 {
		d = d[:12]
	}
	return d
}

// ValuesDigest hashes the final values. encoding/json sorts map keys, so equal values hash
// equally whatever order they were built in.
func ValuesDigest(values map[string]any) (string, error) {
	b, err := json.Marshal(values)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])[:digestLen], nil
}

// KindLabel is the value of LabelOwnerKind for a GVK.
func KindLabel(gvk schema.GroupKind) string {
	v := gvk.Kind
	if gvk.Group != "" {
		v += "." + gvk.Group
	}
	return fitLabel(v)
}

func fitLabel(v string) string {
	if len(v) <= 63 {
		return v
	}
	sum := sha256.Sum256([]byte(v))
	return v[:50] + "-" + hex.EncodeToString(sum[:])[:12]
}

// OwnerAnnotation is the value of AnnotationOwner.
func OwnerAnnotation(gk schema.GroupKind, key types.NamespacedName) string {
	return gk.Group + "/" + gk.Kind + "/" + key.Namespace + "/" + key.Name
}

// ParseOwnerAnnotation inverts OwnerAnnotation.
func ParseOwnerAnnotation(v string) (schema.GroupKind, types.NamespacedName, bool) {
	parts := strings.Split(v, "/")
	if len(parts) != 4 || parts[1] == "" || parts[3] == "" {
		return schema.GroupKind{}, types.NamespacedName{}, false
	}
	return schema.GroupKind{Group: parts[0], Kind: parts[1]}, types.NamespacedName{Namespace: parts[2], Name: parts[3]}, true
}

// ReleaseName is the release name for a CR name (or a rendered releaseName template): names of
// up to 53 characters (Helm's limit) are kept; longer ones are cut and given a stable hash
// suffix.
func ReleaseName(name string) string {
	const max = 53
	if len(name) <= max {
		return name
	}
	sum := sha256.Sum256([]byte(name))
	return strings.TrimRight(name[:max-9], "-.") + "-" + hex.EncodeToString(sum[:])[:8]
}

// Action is the action that made a revision from a CR's spec, as LabelAction records it: a
// fact of the release's history that its CR's status reports (Released's reason), not one
// read back from that status.
type Action string

const (
	ActionInstall Action = "install"
	ActionUpgrade Action = "upgrade"
)

// The results of a run of a revision's tests, as LabelTestResult records them (and
// status.release.tested reports them).
const (
	TestSucceeded = "Succeeded"
	TestFailed    = "Failed"
)

// RecordName is the name of the Secret that holds a release's revision, as Helm's storage
// names it.
func RecordName(release string, version int) string {
	return RecordPrefix + release + ".v" + strconv.Itoa(version)
}

// labelInt is a label's value as a number; 0 when absent or not one.
func labelInt(l map[string]string, key string) int {
	n, _ := strconv.Atoi(l[key])
	return n
}

// labelTime is a label of Unix seconds as a time (zero: absent or not a number).
func labelTime(l map[string]string, key string) time.Time {
	n, err := strconv.ParseInt(l[key], 10, 64)
	if err != nil || n <= 0 {
		return time.Time{}
	}
	return time.Unix(n, 0)
}
