package controllers

import (
	"encoding/json"
	"slices"
	"strconv"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/cache"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"k8s.io/utils/clock"
)

// statuses is what this process last wrote of each CR (its status, as the pass that wrote it
// left it, and its finalizers), until the cache of CRs shows that write or a newer version of
// the CR. A pass that starts right after another's write (events from the objects an action
// just made wake passes that fast) reads the CR from a cache that may not show the write yet;
// it reads the written status and finalizers in place of the older ones, and so decides and
// reports as a pass that read the newest CR would, and does not add rudder's finalizer again
// over a version the API server has moved past (a conflict).
//
// It is client-go's mutation cache for the informer of CRs, as records.Written is for the
// cache of release records: resourceVersions are compared as the integers the API server's
// etcd storage makes them, a write belongs to one incarnation of the CR (a CR of the same name
// made anew has another UID), and an entry the cache has not caught up with within
// statusesTTL is dropped, so that the cache's view wins. The entries live in apimachinery's
// expiring LRU: one goes when a pass reads the CR from a cache that shows its write, so those
// that stay are a deleted CR's, until statusesTTL or the bound.
type statuses struct{ m *cache.LRUExpireCache }

type writtenStatus struct {
	uid types.UID
	rv  uint64
	// status is the status as JSON: a tenth of the memory of its decoded form, which a pass
	// needs only while the cache is behind the write.
	status     []byte
	finalizers []string
}

const (
	// statusesTTL bounds how long a write is preferred to the cache's view of its CR.
	statusesTTL = time.Minute
	// statusesKept bounds the CRs kept; one forgotten early is read from the cache, as after
	// statusesTTL.
	statusesKept = 1 << 14
)

func newStatuses(c clock.PassiveClock) *statuses {
	return &statuses{m: cache.NewLRUExpireCacheWithClock(statusesKept, c)}
}

// wrote keeps status and finalizers as what the CR key (uid) holds since its write was
// answered with resourceVersion rv. What is kept is status as JSON (a hook may have set values
// of any type): read gives it back as JSON reads it.
func (s *statuses) wrote(key types.NamespacedName, uid types.UID, rv string, status any, finalizers []string) {
	n, err := strconv.ParseUint(rv, 10, 64)
	if err != nil {
		return
	}
	raw, err := json.Marshal(status)
	if err != nil {
		return
	}
	s.m.Add(key, writtenStatus{uid: uid, rv: n, status: raw, finalizers: slices.Clone(finalizers)}, statusesTTL)
}

// read puts into obj, read from the cache, the status and finalizers this process wrote of it
// after the version obj is, if any; an entry the cache caught up with, of another incarnation
// of the CR, or too old, is dropped. It returns the status it put (a copy of its own, never
// to be changed), and whether it did.
func (s *statuses) read(obj *unstructured.Unstructured) (status any, ok bool) {
	key := types.NamespacedName{Namespace: obj.GetNamespace(), Name: obj.GetName()}
	v, ok := s.m.Get(key)
	if !ok {
		return nil, false
	}
	w := v.(writtenStatus)
	cached, err := strconv.ParseUint(obj.GetResourceVersion(), 10, 64)
	if err != nil || w.uid != obj.GetUID() || cached >= w.rv {
		s.m.Remove(key)
		return nil, false
	}
	if err := utiljson.Unmarshal(w.status, &status); err != nil {
		s.m.Remove(key)
		return nil, false
	}
	if status == nil {
		delete(obj.Object, "status")
	} else {
		obj.Object["status"] = runtime.DeepCopyJSONValue(status)
	}
	obj.SetFinalizers(slices.Clone(w.finalizers))
	return status, true
}

// forget drops what is kept of the CR at key.
func (s *statuses) forget(key types.NamespacedName) { s.m.Remove(key) }
