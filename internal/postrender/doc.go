// Package postrender owns what a platform team layers on a chart it does not own, applied to
// a render's output before anything checks or applies it: Flux's kustomize post-renderers
// (strategic merge and JSON 6902 patches with a target selector, and image overrides, built
// on sigs.k8s.io/kustomize/api's krusty as Flux does) and common metadata (labels and
// annotations every object carries).
//
// It runs in the render worker (internal/render), under the render's bounds of time and
// memory: what it produces is then bounded, confined, checked for identities and marked by
// rudder exactly as a chart's own output is, so that nothing a patch does can move an object
// out of its release's reach or strip rudder's marks. It knows nothing of Helm's actions,
// of the cluster or of the watch that names it.
package postrender
