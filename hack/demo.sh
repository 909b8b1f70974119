#!/usr/bin/env bash
# make demo: local control plane → CRDs → rudder from source → the three samples → results →
# a live chart edit that shows up as a new Helm revision. Idempotent. `make demo-down` stops it.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
bin=$root/bin
dev=$bin/dev
live=$dev/live
export KUBECONFIG=$dev/kubeconfig
export HELM_CACHE_HOME=$dev/helm/cache HELM_CONFIG_HOME=$dev/helm/config HELM_DATA_HOME=$dev/helm/data
k() { "$bin/kubectl" "$@"; }
h() { "$bin/helm" "$@"; }
step() { printf '\n\033[1m==> %s\033[0m\n' "$*"; }

stop_rudder() {
  if [ -f "$dev/rudder.pid" ] && kill -0 "$(cat "$dev/rudder.pid")" 2>/dev/null; then
    kill -TERM "$(cat "$dev/rudder.pid")"
    for _ in $(seq 1 30); do kill -0 "$(cat "$dev/rudder.pid")" 2>/dev/null || break; sleep 1; done
  fi
  rm -f "$dev/rudder.pid"
}

if [ "${1:-}" = "down" ]; then
  stop_rudder
  "$root/hack/dev-cluster.sh" down
  exit 0
fi

step "Local control plane (etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kwok)"
"$root/hack/dev-cluster.sh" up
k get nodes

step "CRDs"
k apply --server-side --force-conflicts -f "$root/config/crd/bases" >/dev/null
k wait --for=condition=Established crd --all --timeout=60s >/dev/null
k get crd -o custom-columns=NAME:.metadata.name --no-headers | grep -E 'nginxoperators|ats|applications'

step "rudder from source, serving a live copy of charts/ ($live)"
stop_rudder
rm -rf "$live" && mkdir -p "$live/charts"
cp "$root/watches.yaml" "$live/"
# Only the chart directories: charts/ also holds Go tests, whose copy under bin/ would become a
# package of `go test ./...`.
for c in "$root"/charts/*/Chart.yaml; do cp -r "$(dirname "$c")" "$live/charts/"; done
cd "$live"
nohup "$bin/rudder" --kubeconfig "$KUBECONFIG" --watches-file ./watches.yaml \
  --metrics-bind-address 127.0.0.1:18080 --metrics-secure=false --health-probe-bind-address 127.0.0.1:18081 \
  >"$dev/rudder.log" 2>&1 &
echo $! >"$dev/rudder.pid"
cd "$root"
for _ in $(seq 1 30); do curl -fs 127.0.0.1:18081/readyz >/dev/null 2>&1 && break; sleep 1; done
echo "rudder running (pid $(cat "$dev/rudder.pid")), log: $dev/rudder.log, metrics: http://127.0.0.1:18080/metrics"

step "Samples (config/samples, unchanged)"
k apply -k "$root/config/samples"

step "Waiting for the samples"
k -n nginx-operator-system wait --for=condition=Ready nginxoperator/nginxoperator-sample --timeout=120s
k -n default wait --for=condition=Ready application/nginx-sample --timeout=120s
k -n default wait --for=jsonpath='{.status.phase}'=DONE at/at-sample --timeout=120s

step "kubectl get nginxoperators,ats,applications -A"
k get nginxoperators,ats,applications -A
step "helm list -A"
h list -A
step "helm history nginxoperator-sample -n nginx-operator-system"
h history nginxoperator-sample -n nginx-operator-system
step "The At's outcome"
k get at at-sample -o jsonpath='phase={.status.phase} succeeded={.status.succeeded} exitCode={.status.exitCode} reason={.status.reason} started={.status.startTime} finished={.status.finishTime}{"\n"}'
echo "(kwok simulates Pods: the command does not really run, so 'kubectl logs at-sample' has no output to show.)"

step "Live reload: editing $live/charts/nginx/values.yaml in place (image nginx:1.27.3 → nginx:1.27.4)"
rev_before=$(k -n nginx-operator-system get nginxoperator nginxoperator-sample -o jsonpath='{.status.release.revision}')
sed -i 's/^image: nginx:.*/image: nginx:1.27.4/' "$live/charts/nginx/values.yaml"
for _ in $(seq 1 60); do
  rev=$(k -n nginx-operator-system get nginxoperator nginxoperator-sample -o jsonpath='{.status.release.revision}')
  [ "$rev" != "$rev_before" ] && break
  sleep 1
done
k -n nginx-operator-system wait --for=condition=Ready nginxoperator/nginxoperator-sample --timeout=120s
h history nginxoperator-sample -n nginx-operator-system
k -n nginx-operator-system get deployment nginxoperator-sample -o jsonpath='image now: {.spec.template.spec.containers[0].image}{"\n"}'

cat <<MSG

Poke at it:
  export KUBECONFIG=$KUBECONFIG
  bin/kubectl get nginxoperators,ats,applications -A
  bin/helm history nginx-sample -n default
  edit $live/charts/*/templates/* and watch 'bin/helm history' grow
  tail -f $dev/rudder.log
Stop everything: make demo-down
MSG
