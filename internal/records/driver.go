package records

import (
	"sync"

	"helm.sh/helm/v4/pkg/storage/driver"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// The Driver type, beneath the files of its methods: storage.go (Helm's driver interface),
// query.go (its queries through the caches), facts.go (the facts it writes on a record).

// Driver is Helm's Secret storage driver, writing records the way Helm does (same
// Secret name, type, labels and payload: base64 of the gzipped JSON release) with two changes
// to the compression, which Helm's reads (and every other reader's) do not see:
//   - Pooled gzip writers. Helm allocates a fresh writer, over a megabyte of window state, for
//     each of the two records an install writes; at a few hundred releases that was half of
//     everything rudder allocated.
//   - gzip.BestSpeed, not gzip.BestCompression, unless the record is big. A best-compression
//     writer clears 640 KiB of match tables per record, which costs more than compressing a
//     typical record; the records are 5–7 % larger. A record whose payload is over bigRecord
//     at that speed is written at BestCompression, so that every release that fits Helm's
//     record (a Secret's 1 MiB) fits rudder's.
//
// Reads and deletes are Helm's own; so are queries, but for two that rudder's caches of the
// records' metadata answer (see QueryMode): Helm's query is a LIST by label, which the API
// server answers by going through every Secret of the namespace, so that an install or an
// upgrade cost as much as the releases beside it.
//
// It also closes a gap in Helm's install: when its look at storage for the release name fails,
// Helm goes on as if the name were free, and storing revision 1 only fails if revision 1 is
// still there — not when a longer history has pruned it. rudder installs a new CR without a
// read of its own, so after a failed look the driver looks again before it stores a first
// revision.
type Driver struct {
	*driver.Secrets
	impl corev1client.SecretInterface
	// namespace is the driver's; mode says which queries the caches answer; own and foreign
	// are the caches: of the records rudder made (ReleaseSecret, indexed by
	// IndexReleaseSecrets), and of those it did not make (nil: not kept, so no install's
	// check is answered from the caches).
	namespace    string
	mode         QueryMode
	own, foreign client.Reader

	// MemoKey names the driver's namespace and identity in a Memo, which holds what each
	// identity read in each namespace apart.
	MemoKey string
	// written keeps what the driver writes of the records of namespace writtenNS (see Track).
	written   *Written
	writtenNS string

	mu sync.Mutex
	// unsure holds the release names whose last query failed.
	unsure map[string]bool
}

// QueryMode says which of Helm's queries of a release's records rudder's caches answer.
type QueryMode int

const (
	// QueryHelm: every query is Helm's LIST (rollback, uninstall, rudder's own reads of
	// storage, which decide again when a cache was behind).
	QueryHelm QueryMode = iota
	// QueryInstall: install's check that the name is free is answered by the caches when
	// neither shows a record of the name (no request); when one does, Helm's LIST decides. A
	// name taken after the caches' view is still refused: storing revision 1 is a create,
	// which the API server refuses for a Secret that exists (and a release younger than the
	// caches' view has its revision 1).
	QueryInstall
	// QueryUpgrade: a query of the release's records reads those the cache of rudder's
	// records shows, by name, then the revisions after the newest it shows, by name, until
	// one is not there: revisions are numbered in order, so the records the cache has not
	// seen yet are those. An upgrade is only ever of a release whose records are rudder's.
	QueryUpgrade
)
