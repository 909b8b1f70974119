package records

import (
	"maps"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/cache"
	"k8s.io/utils/clock"
)

// Written is what this process last wrote of each release record, as the API server answered
// the write, until the cache of records shows that version or a newer one. A pass that starts
// right after another's write reads the newest revision from the cache (CachedHead), which may
// not show the write yet: the new revision, or the labels a test run or an adoption put on a
// record. Written holds storage's own answer for that moment, so that the pass decides from
// what storage holds, not from an older view, and not from anything the CR's status says.
//
// It is what client-go's mutation cache does for an informer's store, over the metadata cache
// of records. resourceVersions are compared as the integers the API server's etcd storage makes
// them (as the mutation cache compares them); a write the cache has not caught up with within
// writtenTTL is dropped, and the cache's view wins. The entries live in apimachinery's
// expiring LRU, one per release, so that a deleted CR's, which no pass reads again, go by
// themselves, and the whole is bounded.
type Written struct {
	// mu orders the read-change-write of a release's entry.
	mu sync.Mutex
	// releases holds, by the release's namespace and name, a map of what was written of each
	// of its records by record name: replaced on every change, never changed in place.
	releases *cache.LRUExpireCache
	clock    cache.Clock
}

type writtenRecord struct {
	labels map[string]string // nil: deleted
	rv     uint64
	at     time.Time
}

const (
	// writtenTTL bounds how long a write is preferred to the cache's view of its record.
	writtenTTL = time.Minute
	// writtenReleases bounds the releases kept. An entry goes once the cache shows its writes;
	// those that stay are a deleted CR's, until writtenTTL or the bound. One forgotten early is
	// read from the cache, as after writtenTTL.
	writtenReleases = 1 << 14
)

func NewWritten() *Written { return newWritten(clock.RealClock{}) }

func newWritten(c cache.Clock) *Written {
	return &Written{releases: cache.NewLRUExpireCacheWithClock(writtenReleases, c), clock: c}
}

// wrote keeps the record s of namespace ns as a write of it was answered.
func (w *Written) wrote(s *corev1.Secret, ns string) {
	rv, err := strconv.ParseUint(s.ResourceVersion, 10, 64)
	rel := s.Labels["name"]
	if err != nil || rel == "" {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.set(types.NamespacedName{Namespace: ns, Name: rel}, s.Name, &writtenRecord{labels: s.Labels, rv: rv, at: w.clock.Now()})
}

// deleted keeps that the record ns/name, if this process wrote it, was deleted.
func (w *Written) deleted(ns, name string) {
	rel, ok := releaseOfRecord(name)
	if !ok {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	key := types.NamespacedName{Namespace: ns, Name: rel}
	if r, ok := w.records(key)[name]; ok {
		r.labels, r.at = nil, w.clock.Now()
		w.set(key, name, &r)
	}
}

// releaseOfRecord is the release of a record named as Helm's Secrets driver names them
// (RecordName: sh.helm.release.v1.<release>.v<version>).
func releaseOfRecord(name string) (string, bool) {
	rest, ok := strings.CutPrefix(name, RecordPrefix)
	i := strings.LastIndex(rest, ".v")
	if !ok || i <= 0 {
		return "", false
	}
	return rest[:i], true
}

// records is what was written of the records of release key (nil: nothing). The caller holds
// mu.
func (w *Written) records(key types.NamespacedName) map[string]writtenRecord {
	if v, ok := w.releases.Get(key); ok {
		return v.(map[string]writtenRecord)
	}
	return nil
}

// set replaces what was written of record name of release key with r (nil: forgets it). The
// caller holds mu.
func (w *Written) set(key types.NamespacedName, name string, r *writtenRecord) {
	recs := maps.Clone(w.records(key))
	if recs == nil {
		recs = map[string]writtenRecord{}
	}
	if r != nil {
		recs[name] = *r
	} else {
		delete(recs, name)
	}
	if len(recs) == 0 {
		w.releases.Remove(key)
		return
	}
	w.releases.Add(key, recs, writtenTTL)
}

// overlay is cached (the cache's records of release name in ns) with what this process wrote
// of them since, and the records it wrote that the cache does not show yet, as label sets.
func (w *Written) overlay(ns, name string, cached []metav1.PartialObjectMetadata) []map[string]string {
	out := make([]map[string]string, 0, len(cached))
	if w == nil {
		for i := range cached {
			out = append(out, cached[i].Labels)
		}
		return out
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	key := types.NamespacedName{Namespace: ns, Name: name}
	recs := w.records(key)
	now, seen := w.clock.Now(), make(map[string]bool, len(recs))
	for i := range cached {
		r, ok := recs[cached[i].Name]
		if !ok {
			out = append(out, cached[i].Labels)
			continue
		}
		seen[cached[i].Name] = true
		rv, err := strconv.ParseUint(cached[i].ResourceVersion, 10, 64)
		switch {
		case err != nil || rv >= r.rv || now.Sub(r.at) > writtenTTL:
			w.set(key, cached[i].Name, nil) // the cache shows the write, or a newer version
			out = append(out, cached[i].Labels)
		case r.labels != nil:
			out = append(out, r.labels)
		}
	}
	for rec, r := range recs {
		switch {
		case seen[rec]:
		case r.labels == nil || now.Sub(r.at) > writtenTTL:
			w.set(key, rec, nil) // gone, as the cache shows; or too old to trust
		default:
			out = append(out, r.labels)
		}
	}
	return out
}
