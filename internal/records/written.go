package records

import (
	"strconv"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
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
// them (as the mutation cache compares them); an entry the cache has not caught up with
// within writtenTTL is dropped, and the cache's view wins.
type Written struct {
	mu sync.Mutex
	// recs are by the release's namespace and name, then by the record's name.
	recs map[types.NamespacedName]map[string]writtenRecord
	// release is each record's release, by the record's namespace and name (for deletes).
	release map[types.NamespacedName]string
	// swept is when the entries older than writtenTTL were last dropped, those of releases no
	// pass reads again (a deleted CR's) included.
	swept time.Time
}

type writtenRecord struct {
	labels map[string]string // nil: deleted
	rv     uint64
	at     time.Time
}

// writtenTTL bounds how long a write is preferred to the cache's view of its record.
const writtenTTL = time.Minute

func NewWritten() *Written {
	return &Written{recs: map[types.NamespacedName]map[string]writtenRecord{}, release: map[types.NamespacedName]string{}}
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
	w.sweep(time.Now())
	key := types.NamespacedName{Namespace: ns, Name: rel}
	if w.recs[key] == nil {
		w.recs[key] = map[string]writtenRecord{}
	}
	w.recs[key][s.Name] = writtenRecord{labels: s.Labels, rv: rv, at: time.Now()}
	w.release[types.NamespacedName{Namespace: ns, Name: s.Name}] = rel
}

// deleted keeps that the record ns/name, if this process wrote it, was deleted.
func (w *Written) deleted(ns, name string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	rel, ok := w.release[types.NamespacedName{Namespace: ns, Name: name}]
	if !ok {
		return
	}
	recs := w.recs[types.NamespacedName{Namespace: ns, Name: rel}]
	if r, ok := recs[name]; ok {
		r.labels, r.at = nil, time.Now()
		recs[name] = r
	}
}

// sweep drops every entry older than writtenTTL, at most once per writtenTTL.
func (w *Written) sweep(now time.Time) {
	if now.Sub(w.swept) < writtenTTL {
		return
	}
	w.swept = now
	for key, recs := range w.recs {
		for name, r := range recs {
			if now.Sub(r.at) > writtenTTL {
				w.forget(key.Namespace, key.Name, name)
			}
		}
	}
}

// forget drops the record ns/name of release rel.
func (w *Written) forget(ns, rel, name string) {
	key := types.NamespacedName{Namespace: ns, Name: rel}
	delete(w.recs[key], name)
	if len(w.recs[key]) == 0 {
		delete(w.recs, key)
	}
	delete(w.release, types.NamespacedName{Namespace: ns, Name: name})
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
	recs := w.recs[types.NamespacedName{Namespace: ns, Name: name}]
	now, seen := time.Now(), make(map[string]bool, len(recs))
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
			w.forget(ns, name, cached[i].Name) // the cache shows the write, or a newer version
			out = append(out, cached[i].Labels)
		case r.labels != nil:
			out = append(out, r.labels)
		}
	}
	for rec, r := range recs {
		switch {
		case seen[rec]:
		case r.labels == nil || now.Sub(r.at) > writtenTTL:
			w.forget(ns, name, rec) // gone, as the cache shows; or too old to trust
		default:
			out = append(out, r.labels)
		}
	}
	return out
}
