#!/usr/bin/env bash
# The chart-compatibility suite on your own chart: on a local control plane built from bin/
# (make tools), `rudder scaffold` writes the CRD, role and watches entry for CHART, and rudder,
# as its own ServiceAccount with config/rbac plus the scaffolded role only, must bring a CR with
# the chart's defaults to Ready, make no revision while idle, exactly one on a chart edit (its
# version bumped in a copy), and leave none of the release's objects once the CR is deleted.
# It is config/compat_test.go's TestChartCompat, run on CHART instead of the suite's charts.
#
# Usage: hack/chart-compat.sh CHART_DIR [SCAFFOLD_FLAGS...]
#   e.g. hack/chart-compat.sh ~/charts/myagent --set clusterName=dev --values my-values.yaml
set -euo pipefail
chart=${1:?chart directory}
shift
root=$(cd "$(dirname "$0")/.." && pwd)
chart=$(cd "$chart" && pwd)
cd "$root"
make --no-print-directory tools >/dev/null
log=$(mktemp)
status=0
RUDDER_COMPAT_CHART=$chart RUDDER_COMPAT_ARGS="$*" \
  go test -count=1 -v -timeout 15m -run '^TestChartCompat$' ./config/ >"$log" 2>&1 || status=$?
# The test's own lines and what scaffold printed; the control plane's logs stay in $log.
grep -E '^\s*(--- |PASS|FAIL|ok )|compat_test.go|kinds the chart|^\s{10}|outside the namespace|warning:' "$log" || true
[ "$status" = 0 ] && echo "chart-compat: $chart passes every step" || echo "chart-compat: $chart failed; full log: $log"
exit "$status"
