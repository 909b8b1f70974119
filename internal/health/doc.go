// Package health owns the health checks a watch declares for kinds kstatus cannot judge (a
// custom resource with status.phase and no standard conditions): per GroupVersionKind, CEL
// expressions deciding current, inProgress and failed from the object, with Flux's
// healthCheckExprs semantics, in the Kubernetes CEL environment (k8s.io/apiserver's base
// environment and libraries) and with the API server's cost bound per call.
//
// It compiles expressions when the watch loads (a broken one is the watch's load error, with
// its position) and evaluates them on objects; it knows nothing of caches or passes.
package health
