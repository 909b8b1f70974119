// Package render renders Helm charts out of process, bounded in time and memory.
//
// A template is the CR author's to steer: a value fed to tpl can recurse until the goroutine
// stack limit kills the process (a fatal error, which nothing recovers), a count fed to until
// or repeat can allocate until the kernel's OOM killer does, and a loop can spin forever — and
// Go cannot stop a goroutine. So no render of a release runs in rudder's process: a pool of
// worker processes (this binary, re-executed) renders, one render at a time each, and the
// parent kills a worker that runs past its time, grows past its memory, or dies (a stack
// overflow), and reports which bound it hit. What one CR's render can cost is one worker for
// that long; every other CR, and rudder itself, is served on. What a render returns is bounded
// in the worker too (output.go), so that nothing of it costs rudder's process more than the
// render's output bound; and the renders running at once hold a memory budget (Options), so
// that the workers together fit the pod.
//
// A worker holds no credentials. A template's lookup reaches the API server through the
// parent, over a socket the parent serves per worker, with the identity and the guard of the
// action the render is for (internal/helm): the parent confines those requests as it confines
// its own.
//
// The worker is entered from this package's init when the process was started as one (see
// Serve): the binary needs no subcommand, and every test binary that renders is a worker too.
package render
