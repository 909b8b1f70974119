package controllers

import (
	"k8s.io/apimachinery/pkg/types"

	rstatus "github.com/rudder-operator/rudder/api/status"
)

// The in-memory shadows of status.release.failed and rollbackRequest, which a pass consults
// while the cache does not show the status the pass before it wrote yet.

type handled struct {
	uid   types.UID
	value string
}

func (r *Reconciler) rememberRollback(key types.NamespacedName, h handled) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.rollbacks[key] = h
}

func (r *Reconciler) handledRollback(key types.NamespacedName, uid types.UID, value string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	h, ok := r.rollbacks[key]
	return ok && h.uid == uid && h.value == value
}

type failure struct {
	uid    types.UID
	reason string
	failed rstatus.FailedRelease
}

func (r *Reconciler) rememberFailure(key types.NamespacedName, f failure) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.failures[key] = f
}

func (r *Reconciler) failureOf(key types.NamespacedName) (failure, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	f, ok := r.failures[key]
	return f, ok
}

func (r *Reconciler) forgetFailure(key types.NamespacedName) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.failures, key)
}
