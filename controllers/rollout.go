package controllers

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	rolloutv1 "github.com/rudder-operator/rudder/api/rollout/v1alpha1"
)

// A watch's rollouts: the coordinator (rolloutcoord.go) moves each from wave to wave, and
// passes read them through the rollouts door to know whether their CR moves yet (see
// internal/machine's rollout.go).

// throughAll is a status.through past every ordering key: the last wave.
const throughAll = "ffffffffffffffff"

// rolloutReader is the door through which passes read Rollouts (machine.Rollouts).
type rolloutReader struct{ r *Reconciler }

// Rollout is the Rollout named name, from the cache (nil: there is none yet), or as the
// coordinator last wrote it when the cache is behind that write.
func (d rolloutReader) Rollout(ctx context.Context, name string) (*rolloutv1.Rollout, error) {
	r := d.r
	ro := &rolloutv1.Rollout{}
	err := r.opts.Client.Get(ctx, client.ObjectKey{Name: name}, ro)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading rollout %s: %w", name, err)
	}
	if c := r.coord.Load(); c != nil {
		if w := c.current(ro); w != nil {
			return w, nil // the cache is behind the coordinator's last write
		}
	}
	return ro, nil
}
