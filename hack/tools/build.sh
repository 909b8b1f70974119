#!/usr/bin/env bash
# Builds the pinned control-plane components and dev tools into $BIN (default: bin/).
#
# Each tool lives in its own Go module under hack/tools/<module>, so that k8s.io/kubernetes,
# etcd and kwok never enter rudder's go.mod and never constrain each other's dependencies.
#
# Idempotent: every binary gets a stamp (bin/.stamps/<tool>) holding the tool's version and the
# hash of its module's go.mod/go.sum. A binary whose stamp matches is not rebuilt. Built binaries
# are also kept in a per-machine cache ($RUDDER_TOOLS_CACHE, default ~/.cache/rudder/tools) keyed
# by that same stamp, so a fresh clone on a machine that built them once only copies them.
#
# Usage: hack/tools/build.sh [tool ...]   (no argument: all tools)
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
BIN=${BIN:-$root/bin}
CACHE=${RUDDER_TOOLS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/rudder/tools}
mkdir -p "$BIN/.stamps" "$CACHE"

K8S_VERSION=v1.37.2
ETCD_VERSION=v3.7.3
KWOK_VERSION=v0.8.0
# bin/helm is the Helm CLI users run today (Helm 4); bin/helm3 is the last Helm 3, for the tests
# that hold rudder's releases to both CLIs.
HELM_VERSION=v4.3.2
HELM3_VERSION=v3.21.4
CONTROLLER_TOOLS_VERSION=v0.23.0
GOLANGCI_LINT_VERSION=v2.15.0

k8s_ldflags() {
  local date
  date=$(date -u +%Y-%m-%dT%H:%M:%SZ)
  local v=$K8S_VERSION minor
  minor=$(echo "$v" | cut -d. -f2)
  local f=""
  for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    f+=" -X $pkg.gitVersion=$v -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor"
    f+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=$date"
  done
  echo "-s -w$f"
}

# tool -> "module-dir|package|version|ldflags"
spec() {
  case "$1" in
    kube-apiserver | kube-controller-manager | kube-scheduler | kubectl)
      echo "kubernetes|k8s.io/kubernetes/cmd/$1|$K8S_VERSION|$(k8s_ldflags)" ;;
    etcd)
      echo "etcd|go.etcd.io/etcd/server/v3|$ETCD_VERSION|-s -w" ;;
    kwok)
      echo "kwok|sigs.k8s.io/kwok/cmd/kwok|$KWOK_VERSION|-s -w -X sigs.k8s.io/kwok/pkg/consts.Version=${KWOK_VERSION#v}" ;;
    helm)
      echo "helm|helm.sh/helm/v4/cmd/helm|$HELM_VERSION|-s -w -X helm.sh/helm/v4/internal/version.version=$HELM_VERSION -X helm.sh/helm/v4/internal/version.gitTreeState=clean" ;;
    helm3)
      echo "helm3|helm.sh/helm/v3/cmd/helm|$HELM3_VERSION|-s -w -X helm.sh/helm/v3/internal/version.version=$HELM3_VERSION -X helm.sh/helm/v3/internal/version.gitTreeState=clean" ;;
    controller-gen)
      echo "controller-gen|sigs.k8s.io/controller-tools/cmd/controller-gen|$CONTROLLER_TOOLS_VERSION|-s -w -X sigs.k8s.io/controller-tools/pkg/version.version=$CONTROLLER_TOOLS_VERSION" ;;
    golangci-lint)
      echo "golangci-lint|github.com/golangci/golangci-lint/v2/cmd/golangci-lint|$GOLANGCI_LINT_VERSION|-s -w -X main.version=${GOLANGCI_LINT_VERSION#v}" ;;
    *) echo "unknown tool: $1" >&2; return 1 ;;
  esac
}

ALL=(etcd kube-apiserver kube-controller-manager kube-scheduler kubectl kwok helm helm3 controller-gen golangci-lint)
tools=("$@")
[ ${#tools[@]} -gt 0 ] || tools=("${ALL[@]}")

for tool in "${tools[@]}"; do
  IFS='|' read -r mod pkg version ldflags <<<"$(spec "$tool")"
  moddir=$root/hack/tools/$mod
  key="$tool-$version-$(cat "$moddir/go.mod" "$moddir/go.sum" | sha256sum | cut -c1-16)"
  stamp=$BIN/.stamps/$tool
  if [ -x "$BIN/$tool" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$key" ]; then
    continue
  fi
  if [ -x "$CACHE/$key/$tool" ]; then
    echo "tools: $tool $version (from $CACHE)"
    cp "$CACHE/$key/$tool" "$BIN/$tool.tmp" && mv "$BIN/$tool.tmp" "$BIN/$tool"
    echo "$key" >"$stamp"
    continue
  fi
  echo "tools: building $tool $version (cold builds of the Kubernetes components take minutes)"
  start=$(date +%s)
  # A cold build of a Kubernetes component is silent for minutes: say that it is alive.
  ( while sleep 30; do echo "tools: still building $tool ($(($(date +%s) - start))s)"; done ) &
  ticker=$!
  if ! (cd "$moddir" && CGO_ENABLED=0 go build -trimpath -ldflags "$ldflags" -o "$BIN/$tool.tmp" "$pkg"); then
    kill "$ticker" 2>/dev/null
    exit 1
  fi
  kill "$ticker" 2>/dev/null
  wait "$ticker" 2>/dev/null || true
  mv "$BIN/$tool.tmp" "$BIN/$tool"
  echo "$key" >"$stamp"
  mkdir -p "$CACHE/$key" && cp "$BIN/$tool" "$CACHE/$key/$tool"
  echo "tools: built $tool in $(($(date +%s) - start))s"
done
