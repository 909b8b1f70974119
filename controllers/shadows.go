package controllers

import (
	"sync"

	"k8s.io/apimachinery/pkg/types"

	rstatus "github.com/rudder-operator/rudder/api/status"
)

// shadow keeps, per CR, a value a pass wrote into the CR's status, for the passes that read
// the CR from a cache that does not show that write yet (the failure that holds a (chart,
// values) back, the rollback-to value handled). A value belongs to one incarnation of the CR:
// it is not seen by a CR of the same name made anew (another UID).
type shadow[T any] struct {
	mu     sync.Mutex
	values map[types.NamespacedName]shadowed[T]
}

type shadowed[T any] struct {
	uid   types.UID
	value T
}

func newShadow[T any]() *shadow[T] {
	return &shadow[T]{values: map[types.NamespacedName]shadowed[T]{}}
}

// remember keeps v as what the CR (key, uid) was last written with.
func (s *shadow[T]) remember(key types.NamespacedName, uid types.UID, v T) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.values[key] = shadowed[T]{uid, v}
}

// of is what the CR (key, uid) was last written with, if it was.
func (s *shadow[T]) of(key types.NamespacedName, uid types.UID) (T, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := s.values[key]
	if !ok || v.uid != uid {
		var zero T
		return zero, false
	}
	return v.value, true
}

// forget drops what is kept of the CR at key.
func (s *shadow[T]) forget(key types.NamespacedName) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.values, key)
}

// written is a value status.release records with the condition a pass set for it
// (RollbackRequest for a rollback-to value, Tested for a test run): a pass whose cache does
// not show them yet writes both again, since the conditions are written as one list.
type written[T any] struct {
	value T
	cond  *condition
}

// failure is a held-back failure as status.release.failed records it, with the reason
// Released gave.
type failure struct {
	reason string
	failed rstatus.FailedRelease
}
