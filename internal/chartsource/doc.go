// Package chartsource owns the charts named in watches.yaml while rudder runs: it loads each
// chart from its directory (a ConfigMap volume, a PVC, a plain directory), computes a content
// digest, lints it with Helm's lint package, and hands out immutable snapshots that are swapped
// atomically. It is the one reader of chart directories, for the CLI too (Load, Lint).
//
// A chart is the files inside its own directory: a symlink is followed only where it resolves
// inside the chart's resolved directory, every read goes through an os.Root of it, and a
// schema's $ref resolves only to the chart's files (render.CompileSchemas). Anything else
// refuses the chart, naming the file.
//
// It watches the directories with one fsnotify watcher and rescans periodically for filesystems
// that send no events. A chart that fails to load or lint never replaces the last good snapshot;
// the failure is kept beside it so that controllers can show it on their CRs.
//
// It knows nothing of Kubernetes objects: controllers subscribe to changes and decide what to
// enqueue.
package chartsource
