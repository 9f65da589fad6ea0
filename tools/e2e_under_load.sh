#!/usr/bin/env bash
# Run the end-to-end suite RUNS times in a row (5 by default) while a
# busy loop holds one core, and print each run's result and duration:
# the check that the suite does not flake on a loaded machine (issue 10).
#
#   tools/e2e_under_load.sh [RUNS]
#
# Run it from a clean clone; it stops at the first failing run.
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${1:-5}

python3 -m pip install --quiet 'tox>=4'
python3 -m tox -e e2e --notest >/dev/null

# One core kept busy for the whole series.
python3 -c 'while True: pass' &
load=$!
trap 'kill $load 2>/dev/null || true' EXIT

echo "load: busy loop, pid $load, on one of $(nproc) cores"
for run in $(seq "$runs"); do
    started=$SECONDS
    set +e
    python3 -m tox -e e2e >"e2e-run-$run.log" 2>&1
    rc=$?
    set -e
    passed=$(awk '/^ - Passed: /{print $3}' "e2e-run-$run.log" | tail -1)
    failed=$(awk '/^ - Failed: /{print $3}' "e2e-run-$run.log" | tail -1)
    echo "run $run: exit $rc, ${passed:-0} passed, ${failed:-0} failed," \
        "$((SECONDS - started)) s, load average $(cut -d' ' -f1-3 /proc/loadavg)"
    [ "$rc" -eq 0 ] || exit "$rc"
done
