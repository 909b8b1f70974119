// Package chartsource owns the charts named in watches.yaml while rudder runs: it loads each
// chart from its directory (a ConfigMap volume, a PVC, a plain directory), computes a content
// digest, lints it with Helm's lint package, and hands out immutable snapshots that are swapped
// atomically.
//
// It watches the directories with one fsnotify watcher and rescans periodically for filesystems
// that send no events. A chart that fails to load or lint never replaces the last good snapshot;
// the failure is kept beside it so that controllers can show it on their CRs.
//
// It knows nothing of Kubernetes objects: controllers subscribe to changes and decide what to
// enqueue.
package chartsource
