#!/usr/bin/env bash
#
# Licensed under the Apache License, Version 2.0 (the "License"); you may
# not use this file except in compliance with the License. You may obtain
# a copy of the License at
#
#      http://www.apache.org/licenses/LICENSE-2.0
#
# Unless required by applicable law or agreed to in writing, software
# distributed under the License is distributed on an "AS IS" BASIS, WITHOUT
# WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied. See the
# License for the specific language governing permissions and limitations
# under the License.
#
# test-patch.sh: apply the "pluggable hash ring manager" patch to an Ironic
# tree and run Ironic's own checks on what it touches.
#
# Usage:
#   contrib/ironic/test-patch.sh master /path/to/ironic
#       Copies the checkout's HEAD (git clone, so uncommitted changes are
#       left out and the checkout itself is never modified) and applies
#       master/0001-*.patch to the copy.
#   contrib/ironic/test-patch.sh 39.0.0
#       Downloads the ironic==39.0.0 sdist with pip into the work directory,
#       unpacks it and applies 39.0.0/0001-*.patch.
#
# Then, in the copy:
#   1. git apply --unidiff-zero --check, then git apply --unidiff-zero (the
#      patches carry no context lines);
#   2. a virtualenv with Ironic's requirements.txt and test-requirements.txt
#      installed inside OpenStack's upper-constraints (see below), then the
#      patched tree itself in development mode (as tox's usedevelop does),
#      so that its new entry point is registered;
#   3. stestr run --concurrency 1 over the test modules the patch touches,
#      under nice -n 19, printing tests run / passed / failed and the time;
#   4. Ironic's pep8 checks over the touched Python files: flake8 with
#      hacking (the version pinned in Ironic's .pre-commit-config.yaml, with
#      the [flake8] and [flake8:local-plugins] sections of Ironic's tox.ini)
#      and ruff (likewise pinned; configured in Ironic's pyproject.toml),
#      plus Ironic's tools/check-releasenotes.py.
#
# Constraints: master is installed inside upper-constraints-master.txt.
# Ironic 39.0.0 resolves inside none of the files held here (2026.1 is
# Ironic 35; the master file of August 2026 predates 39.0.0), so it is
# installed inside the master file minus the pins that Ironic 39's own
# requirements exclude; the script prints each pin it drops.
# The files are read from tools/constraints/ of this repository, or from
# /work/shared/openstack-constraints/ when that is absent.
#
# Environment:
#   PYTHON       interpreter for the virtualenvs (default: pyenv's 3.11.7 if
#                present, else python3)
#   WORKDIR      where to work (default: a new temporary directory)
#   KEEP=1       keep WORKDIR afterwards (always kept on failure)
#   TEST_REGEX   stestr filter instead of the touched test modules, e.g.
#                'ironic\.tests\.unit\.conductor' to add the users of
#                mgr_utils.py
#   CONSTRAINTS  constraints file to use instead of the one chosen above
#
# Exit status: 0 when the patch applies, every test passes and the checks
# are clean; 1 otherwise; 2 for a usage error.

set -eu
set -o pipefail

usage() {
    sed -n '/^# Usage:/,/^# Exit status/p' "$0" | sed 's/^# \{0,1\}//'
    exit 2
}

HERE=$(cd "$(dirname "$0")" && pwd)
REPO_ROOT=$(cd "$HERE/../.." && pwd)

TARGET=${1:-}
case "$TARGET" in
    master)
        [ $# -eq 2 ] || usage
        SOURCE_TREE=$(cd "$2" && pwd)
        UC_NAME=upper-constraints-master.txt
        ;;
    39.0.0)
        [ $# -eq 1 ] || usage
        UC_NAME=upper-constraints-master.txt
        ;;
    -h|--help|'')
        usage
        ;;
    *)
        echo "unknown target: $TARGET (master or 39.0.0)" >&2
        usage
        ;;
esac

PATCH="$HERE/$TARGET/0001-Make-the-hash-ring-manager-pluggable.patch"
[ -f "$PATCH" ] || { echo "no patch at $PATCH" >&2; exit 2; }

if [ -z "${PYTHON:-}" ]; then
    if [ -x /root/.pyenv/versions/3.11.7/bin/python3 ]; then
        PYTHON=/root/.pyenv/versions/3.11.7/bin/python3
    else
        PYTHON=python3
    fi
fi

if [ -z "${CONSTRAINTS:-}" ]; then
    for dir in "$REPO_ROOT/tools/constraints" \
               /work/shared/openstack-constraints; do
        if [ -f "$dir/$UC_NAME" ]; then
            CONSTRAINTS="$dir/$UC_NAME"
            break
        fi
    done
fi
[ -n "${CONSTRAINTS:-}" ] || { echo "no $UC_NAME found" >&2; exit 2; }

WORKDIR=${WORKDIR:-$(mktemp -d "${TMPDIR:-/tmp}/ironic-patch.XXXXXX")}
mkdir -p "$WORKDIR"
STATUS=1
cleanup() {
    if [ "$STATUS" -eq 0 ] && [ "${KEEP:-0}" != 1 ]; then
        rm -rf "$WORKDIR"
    else
        echo "work directory kept: $WORKDIR"
    fi
}
trap cleanup EXIT

log() {
    echo "=== $(date -u +%H:%M:%S) $*"
}

# 1. The tree, and the patch applied to it.
TREE="$WORKDIR/ironic"
if [ "$TARGET" = master ]; then
    log "copying $SOURCE_TREE (HEAD) to $TREE"
    git clone -q "$SOURCE_TREE" "$TREE"
    log "Ironic master at $(git -C "$TREE" describe --tags --always)"
else
    log "downloading the ironic==39.0.0 sdist"
    "$PYTHON" -m pip download -q --no-deps --no-binary :all: \
        'ironic==39.0.0' -d "$WORKDIR/sdist"
    tar xzf "$WORKDIR"/sdist/ironic-39.0.0.tar.gz -C "$WORKDIR"
    mv "$WORKDIR/ironic-39.0.0" "$TREE"
fi

cd "$TREE"
log "git apply --unidiff-zero --check $PATCH"
git apply --unidiff-zero --check "$PATCH"
git apply --unidiff-zero "$PATCH"
log "patch applied"
# An sdist carries the package metadata generated when it was released
# (ironic.egg-info, without the patch's entry point). Tests run from the
# tree, where that copy would shadow the metadata the editable install
# below generates, so it goes; the version still comes from PKG-INFO.
rm -rf ironic.egg-info

TOUCHED=$(sed -n 's|^diff --git a/\(.*\) b/.*|\1|p' "$PATCH")
PY_FILES=$(echo "$TOUCHED" | grep '\.py$' || true)
TEST_MODULES=$(echo "$TOUCHED" \
    | grep -E '^ironic/tests/.*/test_[a-z0-9_]+\.py$' \
    | sed -e 's|\.py$||' -e 's|/|\\.|g' || true)
if [ -z "${TEST_REGEX:-}" ]; then
    TEST_REGEX="^($(echo "$TEST_MODULES" | paste -sd '|' -))\."
fi

# 2. The virtualenv, inside the constraints.
VENV="$WORKDIR/venv"
log "virtualenv with $("$PYTHON" --version) in $VENV"
"$PYTHON" -m venv "$VENV"
PIP="$VENV/bin/pip"
nice -n 19 "$PIP" install -q packaging

FILTERED="$WORKDIR/constraints.txt"
log "constraints: $CONSTRAINTS"
"$VENV/bin/python" - "$CONSTRAINTS" "$FILTERED" requirements.txt \
    test-requirements.txt <<'EOF'
# Keep the pins Ironic's own requirements accept; drop the others (and
# any pin of ironic itself), saying which.
import re
import sys

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

source, target, req_files = sys.argv[1], sys.argv[2], sys.argv[3:]
wanted = {}
for req_file in req_files:
    with open(req_file) as f:
        for line in f:
            line = line.split('#')[0].strip()
            if line and not line.startswith('-'):
                req = Requirement(line)
                wanted.setdefault(canonicalize_name(req.name),
                                  []).append(req.specifier)
kept = []
with open(source) as f:
    for line in f:
        pin = re.match(r'^([A-Za-z0-9_.\-]+)===([^;\s]+)', line)
        if pin:
            name = canonicalize_name(pin.group(1))
            version = pin.group(2)
            if name == 'ironic' or not all(
                    spec.contains(version, prereleases=True)
                    for spec in wanted.get(name, [])):
                print('    dropped pin: %s' % line.strip())
                continue
        kept.append(line)
with open(target, 'w') as f:
    f.writelines(kept)
EOF

log "installing requirements.txt and test-requirements.txt"
nice -n 19 "$PIP" install -q -c "$FILTERED" -r requirements.txt \
    -r test-requirements.txt
log "installing the patched tree (editable)"
nice -n 19 "$PIP" install -q -c "$FILTERED" --no-deps -e .
"$VENV/bin/python" - <<'EOF'
from importlib import metadata
eps = metadata.entry_points(group='ironic.hash_ring_managers')
print('    ironic %s; ironic.hash_ring_managers: %s' % (
    metadata.version('ironic'),
    ', '.join('%s=%s' % (ep.name, ep.value) for ep in eps) or 'none'))
EOF

# 3. The unit tests of the touched test modules.
log "stestr run --concurrency 1 '$TEST_REGEX'"
TEST_LOG="$WORKDIR/stestr.log"
TEST_START=$(date +%s)
TEST_RC=0
nice -n 19 "$VENV/bin/stestr" run --concurrency 1 "$TEST_REGEX" \
    > "$TEST_LOG" 2>&1 || TEST_RC=$?
TEST_SECONDS=$(( $(date +%s) - TEST_START ))
grep -E '^(FAIL|ERROR):' "$TEST_LOG" || true
# stestr's own count lines, as they are: what CI's report adds up.
grep -E '^ - (Passed|Failed|Skipped): [0-9]+$' "$TEST_LOG" || true
RAN=$(sed -n 's/^Ran: \([0-9]*\) tests.*/\1/p' "$TEST_LOG" | tail -1)
PASSED=$(sed -n 's/^ - Passed: \([0-9]*\)/\1/p' "$TEST_LOG" | tail -1)
FAILED=$(sed -n 's/^ - Failed: \([0-9]*\)/\1/p' "$TEST_LOG" | tail -1)
SKIPPED=$(sed -n 's/^ - Skipped: \([0-9]*\)/\1/p' "$TEST_LOG" | tail -1)
echo "    tests run: ${RAN:-?}, passed: ${PASSED:-?}," \
     "failed: ${FAILED:-?}, skipped: ${SKIPPED:-?}," \
     "wall time: ${TEST_SECONDS} s (stestr exit status $TEST_RC)"

# 4. Ironic's pep8 checks over the touched files.
HACKING_REV=$(sed -n '/openstack\/hacking/,/rev:/s/.*rev: *v\{0,1\}//p' \
    .pre-commit-config.yaml | head -1)
RUFF_REV=$(sed -n '/ruff-pre-commit/,/rev:/s/.*rev: *v\{0,1\}//p' \
    .pre-commit-config.yaml | head -1)
LINT_VENV="$WORKDIR/venv-lint"
log "flake8 with hacking==$HACKING_REV, ruff==$RUFF_REV"
"$PYTHON" -m venv "$LINT_VENV"
nice -n 19 "$LINT_VENV/bin/pip" install -q "hacking==$HACKING_REV" \
    "ruff==$RUFF_REV"
LINT_RC=0
# shellcheck disable=SC2086
nice -n 19 "$LINT_VENV/bin/flake8" $PY_FILES || LINT_RC=1
# shellcheck disable=SC2086
nice -n 19 "$LINT_VENV/bin/ruff" check --no-fix $PY_FILES || LINT_RC=1
"$VENV/bin/python" tools/check-releasenotes.py || LINT_RC=1
if [ "$LINT_RC" -eq 0 ]; then
    echo "    flake8 (hacking), ruff, check-releasenotes: clean over" \
         "$(echo "$PY_FILES" | wc -w) files"
fi

log "summary for $TARGET: patch applied; tests run ${RAN:-?}," \
    "passed ${PASSED:-?}, failed ${FAILED:-?} in ${TEST_SECONDS} s;" \
    "lint $([ "$LINT_RC" -eq 0 ] && echo clean || echo FAILED)"
if [ "$TEST_RC" -eq 0 ] && [ "$LINT_RC" -eq 0 ]; then
    STATUS=0
fi
exit "$STATUS"
