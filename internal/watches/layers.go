package watches

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"

	"github.com/rudder-operator/rudder/internal/postrender"
)

// What a platform team layers on a chart it does not own, without forking it: post-renderers
// (kustomize patches and image overrides) and common metadata, applied to every render of the
// watch's releases (internal/postrender) before rudder's checks and marks.

// completeLayers checks the layers and keeps them, with their digest, for every release of
// the watch: they are read on every pass.
func (c completing) completeLayers() error {
	w := c.w
	s := &postrender.Spec{PostRenderers: w.PostRenderers, CommonMetadata: w.CommonMetadata}
	if s.Empty() {
		return nil
	}
	if err := s.Check(); err != nil {
		return err
	}
	w.post, w.layersDigest = s, s.Digest()
	return nil
}

// ChartDigest is the digest of what the watch renders a release from: the chart's (chart, as
// the chart source has it), and, when the watch has post-renderers or common metadata, those
// too, so that changing them upgrades each release once, as a chart edit does. A watch with
// neither keeps the chart's own digest.
func (w *Watch) ChartDigest(chart string) string {
	if w.layersDigest == "" {
		return chart
	}
	sum := sha256.Sum256([]byte(strings.TrimPrefix(chart, "sha256:") + "\x00" + w.layersDigest))
	return "sha256:" + hex.EncodeToString(sum[:])
}
