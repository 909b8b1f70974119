#!/usr/bin/env bash
# make dev-cluster / make dev-cluster-down: the local control plane as a background process.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
dev=${DEV_DIR:-$root/bin/dev}
pidfile=$dev/devcluster.pid
mkdir -p "$dev"

running() { [ -f "$pidfile" ] && kill -0 "$(cat "$pidfile")" 2>/dev/null; }

case "${1:-up}" in
up)
  if running && [ -f "$dev/ready" ]; then
    echo "dev-cluster: already running (pid $(cat "$pidfile")); kubeconfig $dev/kubeconfig"
    exit 0
  fi
  (cd "$root" && go build -o bin/devcluster ./hack/devcluster)
  echo "dev-cluster: starting etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kwok (logs in $dev)"
  RUDDER_BIN_DIR=$root/bin nohup "$root/bin/devcluster" --dir "$dev" >"$dev/devcluster.log" 2>&1 &
  echo $! >"$pidfile"
  for _ in $(seq 1 180); do
    if [ -f "$dev/ready" ]; then
      echo "dev-cluster: ready. export KUBECONFIG=$dev/kubeconfig"
      exit 0
    fi
    if ! running; then
      echo "dev-cluster: failed to start:" >&2
      tail -20 "$dev/devcluster.log" >&2
      exit 1
    fi
    sleep 1
  done
  echo "dev-cluster: not ready after 180s; see $dev" >&2
  exit 1
  ;;
down)
  if running; then
    kill -TERM "$(cat "$pidfile")"
    for _ in $(seq 1 60); do running || break; sleep 1; done
    running && kill -KILL "$(cat "$pidfile")" || true
    echo "dev-cluster: stopped"
  else
    echo "dev-cluster: not running"
  fi
  rm -f "$pidfile" "$dev/ready"
  ;;
*) echo "usage: $0 up|down" >&2; exit 2 ;;
esac
