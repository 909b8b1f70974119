#!/usr/bin/env bash
# Golden-file tests of charts, on `rudder template`: for every DIR/<case>.cr.yaml, what rudder
# would apply for those CRs must equal DIR/<case>.golden.yaml. Copy this pattern for your own
# charts: write a CR per case, run with UPDATE=1 once, review and commit the golden files.
#
# Usage: hack/template-test.sh WATCHES_FILE DIR      (UPDATE=1 rewrites the golden files)
set -euo pipefail
watches=${1:?watches file}
dir=${2:?directory of <case>.cr.yaml files}
rudder=${RUDDER:-$(dirname "$0")/../bin/rudder}
failed=0 passed=0
for cr in "$dir"/*.cr.yaml; do
  golden=${cr%.cr.yaml}.golden.yaml
  out=$(mktemp)
  if ! "$rudder" template --watches-file "$watches" "$cr" >"$out"; then
    echo "FAIL $cr: rudder template failed"; failed=$((failed + 1)); rm -f "$out"; continue
  fi
  if [ "${UPDATE:-}" = 1 ]; then
    mv "$out" "$golden"; echo "updated $golden"; passed=$((passed + 1)); continue
  fi
  if diff -u "$golden" "$out"; then
    passed=$((passed + 1))
  else
    echo "FAIL $cr: output differs from $golden (UPDATE=1 rewrites it)"; failed=$((failed + 1))
  fi
  rm -f "$out"
done
echo "template tests: $passed passed, $failed failed"
[ "$failed" = 0 ]
