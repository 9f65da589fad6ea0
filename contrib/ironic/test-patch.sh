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
# test-patch.sh: apply the series of contrib/ironic/ (0001: the pluggable
# hash ring manager, "change A"; 0002 and 0003: the conductor's workers
# during the hash ring reset wait and the conductor hooks, "change B") to
# an Ironic tree, stage by stage, and run Ironic's own checks on what each
# stage touches; or commit the series in a branch of an Ironic checkout.
#
# Usage:
#   contrib/ironic/test-patch.sh master /path/to/ironic
#       Copies the checkout's HEAD (git clone, so uncommitted changes are
#       left out and the checkout itself is never modified) and applies
#       master/000[1-3]-*.patch to the copy.
#   contrib/ironic/test-patch.sh 39.0.0
#       Downloads the ironic==39.0.0 sdist with pip into the work directory,
#       unpacks it, makes it a git repository with one commit (the sdist as
#       released, without its stale ironic.egg-info) and applies
#       39.0.0/000[1-3]-*.patch.
#   contrib/ironic/test-patch.sh --self-test-hunks master /path/to/ironic
#   contrib/ironic/test-patch.sh --self-test-hunks 39.0.0
#       Only the self-test of the hunk placement check (below): no
#       virtualenv, a few seconds once the tree is there.
#   contrib/ironic/test-patch.sh --commit master /path/to/ironic
#   contrib/ironic/test-patch.sh --commit 39.0.0 /path/to/ironic
#       Commits the series in a new branch of the given Ironic checkout
#       (BRANCH, default pluggable-hash-ring-manager), created from its
#       HEAD and left checked out: each patch is applied with git apply
#       --unidiff-zero --index and committed with its own subject and
#       message (git mailinfo), under the checkout's git identity, then
#       checked for hunk placement as below (a misplaced hunk fails, as a
#       patch that does not apply does). The result is ordinary commits, which
#       git format-patch (with context) or git review can send. Refused if
#       the checkout has uncommitted changes to tracked files or the branch
#       exists. On a failure the checkout goes back to where it was and
#       the new branch is deleted (kept, not checked out, with KEEP=1).
#       The current branch is never changed. SIGNOFF=1 adds git commit's
#       Signed-off-by.
#
# Stages (the test runs): "A" is 0001 applied, "A+B" is 0001, 0002 and
# 0003 applied. Both are applied in turn to one fresh tree (A+B on top of
# A), so each stage tests a tree with exactly its patches. For each:
#   1. git apply --unidiff-zero --check --index, then git apply
#      --unidiff-zero --index, patch by patch (the patches carry no context
#      lines);
#   2. the hunk placement check: a zero-context hunk is placed by its line
#      number alone, so on a tree that moved an addition can land in
#      another function without any error. git diff -U0, with git's python
#      function-name driver, regenerates each patch from the tree before
#      and after it; file by file and hunk by hunk, the function named
#      after the second @@ and the +/- lines must be those of the stored
#      patch ("hunks: N of N inside the function they belong to"; a
#      mismatch is printed with the file and both headers, and fails).
#      What it cannot see: a hunk moved within its function, or into
#      another whose def line reads the same (two classes' setUp);
#   3. the patched tree installed in development mode (as tox's usedevelop
#      does) into the one virtualenv of the run, so that the entry point
#      0001 adds is registered; installed again by a later stage only if
#      that stage's patches touch pyproject.toml, setup.cfg or setup.py;
#   4. stestr run --concurrency 1 over the test modules the stage's
#      patches touch, under nice -n 19, printing stestr's own " - Passed:"
#      and " - Failed:" lines, the failures' output, the tests whose process
#      died under them, and "stage A: tests run X, passed Y, failed Z";
#   5. Ironic's pep8 checks over the Python files the stage's patches
#      touch: flake8 with hacking (the version pinned in Ironic's
#      .pre-commit-config.yaml, with the [flake8] and [flake8:local-plugins]
#      sections of Ironic's tox.ini) and ruff (likewise pinned; configured
#      in Ironic's pyproject.toml), plus Ironic's tools/check-releasenotes.py.
# Before the stages, the self-test of the hunk check: a copy of 0001 with
# one addition moved a few lines (both line numbers, so that it still
# applies) into another function, as Python's ast module finds it in the
# base tree, is applied to a scratch index of the base commit; the check
# must report that file. The unmoved 0001 must pass the same way.
#
# The virtualenv holds Ironic's requirements.txt and test-requirements.txt
# inside OpenStack's upper-constraints, built once per run (the series
# changes no requirement). Master is installed inside
# upper-constraints-master.txt. Ironic 39.0.0 resolves inside none of the
# files held here (2026.1 is Ironic 35; the master file of August 2026
# predates 39.0.0), so it is installed inside the master file minus the
# pins that Ironic 39's own requirements exclude; the script prints each
# pin it drops. The files are read from tools/constraints/ of this
# repository, or from /work/shared/openstack-constraints/ when that is
# absent.
#
# Environment:
#   PYTHON       interpreter for the virtualenvs and the hunk check
#                (default: pyenv's 3.11.7 if present, else python3)
#   WORKDIR      where to work (default: a new temporary directory)
#   KEEP=1       keep WORKDIR afterwards (always kept on failure)
#   TEST_REGEX   stestr filter for every stage instead of the touched test
#                modules, e.g. 'ironic\.tests\.unit\.conductor' to add the
#                users of mgr_utils.py
#   TEST_TIMEOUT seconds after which a stage's stestr run is stopped, with
#                its test process (default 900)
#   CONSTRAINTS  constraints file to use instead of the one chosen above
#   BRANCH       --commit: the branch to create
#   SIGNOFF=1    --commit: git commit -s
#
# Exit status: 0 when every patch applies, every hunk is where the stored
# patch puts it, the moved hunk of the self-test is caught, every test
# passes and the checks are clean (--commit: the branch is made and its
# hunks are in place); 1 otherwise; 2 for a usage error or a checkout
# --commit refuses.

set -eu
set -o pipefail

usage() {
    sed -n '/^# Usage:/,/^# Exit status/p' "$0" | sed 's/^# \{0,1\}//'
    exit 2
}

HERE=$(cd "$(dirname "$0")" && pwd)
REPO_ROOT=$(cd "$HERE/../.." && pwd)

MODE=run
case "${1:-}" in
    --self-test-hunks) MODE=self-test; shift ;;
    --commit) MODE=commit; shift ;;
esac

TARGET=${1:-}
case "$TARGET" in
    master)
        [ $# -eq 2 ] || usage
        SOURCE_TREE=$(cd "$2" && pwd)
        UC_NAME=upper-constraints-master.txt
        ;;
    39.0.0)
        if [ "$MODE" = commit ]; then
            [ $# -eq 2 ] || usage
            SOURCE_TREE=$(cd "$2" && pwd)
        else
            [ $# -eq 1 ] || usage
        fi
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

PATCHES=("$HERE/$TARGET"/000[0-9]-*.patch)
if [ "${#PATCHES[@]}" -ne 3 ] || [ ! -f "${PATCHES[0]}" ]; then
    echo "expected the three patches 0001 to 0003 in $HERE/$TARGET" >&2
    exit 2
fi
# The stages: their names and the number of patches each applies.
STAGE_NAMES=("A" "A+B")
STAGE_PATCHES=(1 3)

if [ -z "${PYTHON:-}" ]; then
    if [ -x /root/.pyenv/versions/3.11.7/bin/python3 ]; then
        PYTHON=/root/.pyenv/versions/3.11.7/bin/python3
    else
        PYTHON=python3
    fi
fi

if [ "$MODE" = run ] && [ -z "${CONSTRAINTS:-}" ]; then
    for dir in "$REPO_ROOT/tools/constraints" \
        /work/shared/openstack-constraints; do
        if [ -f "$dir/$UC_NAME" ]; then
            CONSTRAINTS="$dir/$UC_NAME"
            break
        fi
    done
    [ -n "${CONSTRAINTS:-}" ] || { echo "no $UC_NAME found" >&2; exit 2; }
fi

WORKDIR=${WORKDIR:-$(mktemp -d "${TMPDIR:-/tmp}/ironic-patch.XXXXXX")}
mkdir -p "$WORKDIR"
STATUS=1
NOTHING_TO_KEEP=0
# shellcheck disable=SC2329  # run by the EXIT trap
cleanup() {
    if [ "$NOTHING_TO_KEEP" = 1 ] || { [ "$STATUS" -eq 0 ] \
            && [ "${KEEP:-0}" != 1 ]; }; then
        rm -rf "$WORKDIR"
    else
        echo "work directory kept: $WORKDIR"
    fi
}
trap cleanup EXIT

log() {
    echo "=== $(date -u +%H:%M:%S) $*"
}

# git diff's function names for Python files: git's own python driver.
ATTRIBUTES="$WORKDIR/attributes"
echo '*.py diff=python' > "$ATTRIBUTES"

# The hunk check's helper: compare a stored patch with the diff git
# regenerates, or write a copy of a patch with one hunk moved.
HUNKS_PY="$WORKDIR/hunks.py"
cat > "$HUNKS_PY" <<'EOF'
import ast
import os
import re
import sys

DIFF_LINE = re.compile(r'^diff --git a/(.+) b/(.+)$')
HUNK_LINE = re.compile(
    r'^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@(?: (.*))?$')


class Hunk:
    def __init__(self, position, match):
        self.position = position  # index of the header among the lines
        self.header = match.group(0)
        self.old_start = int(match.group(1))
        self.old_len = int(match.group(2) or 1)
        self.new_start = int(match.group(3))
        self.new_len = int(match.group(4) or 1)
        self.function = match.group(5) or ''
        self.lines = []


def read(path):
    """The lines of a diff and its hunks, file by file, in order."""
    with open(path, encoding='utf-8', errors='surrogateescape') as f:
        lines = f.read().split('\n')
    files = {}
    current = None
    i = 0
    while i < len(lines):
        found = DIFF_LINE.match(lines[i])
        if found:
            current = found.group(2)
            files[current] = []
            i += 1
            continue
        found = HUNK_LINE.match(lines[i]) if current else None
        i += 1
        if not found:
            continue
        hunk = Hunk(i - 1, found)
        removed = added = 0
        # Without context lines, the header's counts say where it ends.
        while removed < hunk.old_len or added < hunk.new_len:
            if i >= len(lines):
                sys.exit('%s: %s ends inside a hunk' % (path, current))
            line = lines[i]
            if line.startswith('-'):
                removed += 1
            elif line.startswith('+'):
                added += 1
            elif not line.startswith('\\'):
                sys.exit('%s: %s: a line which is no zero-context hunk '
                         'line: %r' % (path, current, line))
            hunk.lines.append(line)
            i += 1
        while i < len(lines) and lines[i].startswith('\\'):
            hunk.lines.append(lines[i])
            i += 1
        files[current].append(hunk)
    return lines, files


def compare(label, stored_path, regenerated_path):
    stored = read(stored_path)[1]
    regenerated = read(regenerated_path)[1]
    total = sum(len(hunks) for hunks in stored.values())
    placed = renumbered = 0
    problems = []
    for path, hunks in stored.items():
        theirs = regenerated.get(path)
        if theirs is None:
            problems.append('%s: changed by the patch, not in the tree'
                            % path)
            continue
        if len(theirs) != len(hunks):
            problems.append(
                '%s: %d hunks in the patch, %d regenerated\n%s' % (
                    path, len(hunks), len(theirs), '\n'.join(
                        ['        patch:       ' + h.header for h in hunks]
                        + ['        regenerated: ' + h.header
                           for h in theirs])))
            continue
        for number, (mine, other) in enumerate(zip(hunks, theirs), 1):
            if mine.function != other.function:
                wrong = 'in another function'
            elif mine.lines != other.lines:
                wrong = 'the +/- lines differ'
            else:
                wrong = None
            if wrong:
                problems.append(
                    '%s, hunk %d of %d: %s\n'
                    '        patch:       %s\n'
                    '        regenerated: %s' % (
                        path, number, len(hunks), wrong, mine.header,
                        other.header))
            else:
                placed += 1
                if ((mine.old_start, mine.new_start)
                        != (other.old_start, other.new_start)):
                    renumbered += 1
    for path in regenerated:
        if path not in stored:
            problems.append('%s: changed in the tree, not by the patch'
                            % path)
    print('    %s: hunks: %d of %d inside the function they belong to'
          % (label, placed, total))
    if renumbered:
        print('    (%d of them at other line numbers than in the patch: '
              'the tree is not the one it was made on)' % renumbered)
    for problem in problems:
        print('    MISMATCH in ' + problem)
    return 1 if problems or placed != total else 0


def innermost(nodes, line):
    """The innermost def or class whose body holds lines line, line+1."""
    best = None
    for node in nodes:
        if (node.body[0].lineno <= line and line + 1 <= node.end_lineno
                and (best is None or node.lineno > best.lineno)):
            best = node
    return best


def move(stored_path, tree, moved_path):
    """Copy a patch with its first movable addition in another function.

    The addition's old and new start both move by the same few lines, so
    that it still applies, staying between its neighbours in the file; the
    function it lands in is found by Python's ast module in the tree, not
    by git. Prints the file, both headers and the def it lands in.
    """
    lines, files = read(stored_path)
    function_types = (ast.FunctionDef, ast.AsyncFunctionDef)
    for path, hunks in files.items():
        source_path = os.path.join(tree, path)
        if not path.endswith('.py') or not os.path.isfile(source_path):
            continue
        with open(source_path, encoding='utf-8') as f:
            source = f.read()
        source_lines = source.split('\n')
        nodes = [node for node in ast.walk(ast.parse(source))
                 if isinstance(node, function_types + (ast.ClassDef,))]
        for n, hunk in enumerate(hunks):
            if hunk.old_len or not hunk.function:
                continue
            low = 1
            if n:
                previous = hunks[n - 1]
                low = previous.old_start + max(previous.old_len, 1) + 1
            high = len(source_lines) - 2
            if n + 1 < len(hunks):
                following = hunks[n + 1]
                high = following.old_start - (2 if following.old_len
                                              else 1) - 1
            for distance in range(2, 41):
                for shift in (-distance, distance):
                    line = hunk.old_start + shift
                    if not low <= line <= high:
                        continue
                    node = innermost(nodes, line)
                    if not isinstance(node, function_types):
                        continue
                    definition = source_lines[node.lineno - 1].strip()
                    if definition.startswith(hunk.function.strip()):
                        continue
                    lines[hunk.position] = '@@ -%d,0 +%d%s @@ %s' % (
                        line, hunk.new_start + shift,
                        '' if hunk.new_len == 1 else ',%d' % hunk.new_len,
                        hunk.function)
                    with open(moved_path, 'w', encoding='utf-8',
                              errors='surrogateescape') as f:
                        f.write('\n'.join(lines))
                    print('\t'.join([path, hunk.header, lines[hunk.position],
                                     definition]))
                    return 0
    sys.exit('%s: no addition to move into another function' % stored_path)


if __name__ == '__main__':
    if sys.argv[1] == 'compare':
        sys.exit(compare(*sys.argv[2:5]))
    sys.exit(move(*sys.argv[2:5]))
EOF

# regen_diff REPO BEFORE AFTER OUT: the zero-context diff between two
# trees or commits, with git's python function names and no user setting
# (algorithm, prefixes, renames) that would change its hunks.
regen_diff() {
    git -C "$1" -c core.attributesFile="$ATTRIBUTES" \
        -c diff.noprefix=false -c diff.mnemonicPrefix=false \
        diff -U0 --no-color --no-ext-diff --no-textconv --no-renames \
        --no-relative --diff-algorithm=myers --indent-heuristic \
        --src-prefix=a/ --dst-prefix=b/ "$2" "$3" > "$4"
}

# hunk_check REPO BEFORE AFTER PATCH: the hunk placement check of PATCH,
# applied to BEFORE giving AFTER.
hunk_check() {
    local regenerated
    regenerated="$WORKDIR/regenerated-$(basename "$4")"
    regen_diff "$1" "$2" "$3" "$regenerated" || return 1
    "$PYTHON" "$HUNKS_PY" compare "$(basename "$4")" "$4" "$regenerated"
}

# tree_with REPO BASE PATCH: apply PATCH to a scratch index holding BASE
# (the work tree is not touched) and print the tree it gives.
tree_with() {
    local index="$WORKDIR/scratch.index"
    rm -f "$index"
    GIT_INDEX_FILE=$index git -C "$1" read-tree "$2" || return 1
    GIT_INDEX_FILE=$index git -C "$1" apply --cached --unidiff-zero "$3" \
        || return 1
    GIT_INDEX_FILE=$index git -C "$1" write-tree
}

# self_test_hunks REPO BASE: the stored 0001 must pass the hunk check and
# a copy with one addition moved into another function must fail it.
# REPO's work tree must be at BASE (the moved hunk's new function is read
# from it).
self_test_hunks() {
    local repo=$1 base=$2 patch=${PATCHES[0]} moved="$WORKDIR/moved.patch"
    local output file stored_header moved_header definition after rc
    log "self-test of the hunk check with $(basename "$patch")"
    after=$(tree_with "$repo" "$base" "$patch") || return 1
    echo "    control, the patch as stored:"
    hunk_check "$repo" "$base" "$after" "$patch" || {
        echo "    self-test: the stored patch fails the check on its" \
             "base tree"
        return 1
    }
    output=$("$PYTHON" "$HUNKS_PY" move "$patch" "$repo" "$moved") \
        || return 1
    IFS=$'\t' read -r file stored_header moved_header definition \
        <<< "$output"
    echo "    moved in $file:"
    echo "        stored: $stored_header"
    echo "        moved:  $moved_header"
    echo "        (after that line, the base tree is inside: $definition)"
    after=$(tree_with "$repo" "$base" "$moved") || {
        echo "    self-test: the moved copy does not apply"
        return 1
    }
    echo "    the moved copy applies; the check on it:"
    rc=0
    output=$(hunk_check "$repo" "$base" "$after" "$moved") || rc=$?
    echo "$output"
    if [ "$rc" -ne 0 ] && grep -qF "MISMATCH in $file," <<< "$output"; then
        echo "    self-test: the deliberately moved hunk was caught"
        return 0
    fi
    echo "    self-test: the deliberately moved hunk was NOT caught"
    return 1
}

# prepare_tree: TREE, the unpatched Ironic as a git repository, and BASE,
# its commit.
prepare_tree() {
    TREE="$WORKDIR/ironic"
    if [ "$TARGET" = master ]; then
        log "copying $SOURCE_TREE (HEAD) to $TREE"
        git clone -q "$SOURCE_TREE" "$TREE"
        log "Ironic master at $(git -C "$TREE" describe --tags --always)"
    else
        log "downloading the ironic==39.0.0 sdist"
        "$PYTHON" -m pip download -q --no-deps --no-binary :all: \
            'ironic==39.0.0' -d "$WORKDIR/sdist"
        tar --no-same-owner -xzf "$WORKDIR"/sdist/ironic-39.0.0.tar.gz \
            -C "$WORKDIR"
        mv "$WORKDIR/ironic-39.0.0" "$TREE"
        # An sdist carries the package metadata generated when it was
        # released (ironic.egg-info, without the series' entry point).
        # Tests run from the tree, where that copy would shadow the
        # metadata the editable install generates, so it goes; the
        # version still comes from PKG-INFO.
        rm -rf "$TREE/ironic.egg-info"
        # A git repository, for the hunk check's diffs: the sdist as
        # released is its one commit.
        git -C "$TREE" init -q
        git -C "$TREE" add --all
        git -C "$TREE" -c user.name=test-patch \
            -c user.email=test-patch@localhost \
            commit -q -m "ironic 39.0.0 as released"
        log "Ironic 39.0.0 sdist unpacked, committed as the base"
    fi
    mkdir -p "$TREE/.git/info"
    cp "$ATTRIBUTES" "$TREE/.git/info/attributes"
    BASE=$(git -C "$TREE" rev-parse HEAD)
}

# touched PATCH...: the files the patches touch, one a line.
touched() {
    sed -n 's|^diff --git a/\(.*\) b/.*|\1|p' "$@" | sort -u
}

###########################################################################
# --commit: the series as commits in a new branch of a checkout.
###########################################################################
if [ "$MODE" = commit ]; then
    # refuse MESSAGE...: say why nothing was done, and stop.
    refuse() {
        echo "$*" >&2
        NOTHING_TO_KEEP=1
        exit 2
    }
    CHECKOUT=$(git -C "$SOURCE_TREE" rev-parse --show-toplevel) \
        || refuse "$SOURCE_TREE is no git checkout"
    BRANCH=${BRANCH:-pluggable-hash-ring-manager}
    DIRTY=$(git -C "$CHECKOUT" status --porcelain --untracked-files=no)
    if [ -n "$DIRTY" ]; then
        git -C "$CHECKOUT" status --short --untracked-files=no >&2
        refuse "$CHECKOUT has uncommitted changes; commit or stash them"
    fi
    if git -C "$CHECKOUT" show-ref --verify --quiet "refs/heads/$BRANCH"; then
        refuse "branch $BRANCH exists in $CHECKOUT; remove it or set BRANCH"
    fi
    git -C "$CHECKOUT" var GIT_COMMITTER_IDENT > /dev/null \
        || refuse "no git identity in $CHECKOUT (user.name, user.email)"
    ORIGIN=$(git -C "$CHECKOUT" symbolic-ref -q --short HEAD \
        || git -C "$CHECKOUT" rev-parse HEAD)
    START=$(git -C "$CHECKOUT" rev-parse HEAD)
    log "branch $BRANCH of $CHECKOUT from $ORIGIN" \
        "($(git -C "$CHECKOUT" log -1 --format='%h %s' "$START"))"
    git -C "$CHECKOUT" checkout -q -b "$BRANCH"

    # commit_patch PATCH: apply, commit with the patch's message, check.
    commit_patch() {
        local patch=$1 info="$WORKDIR/info" message="$WORKDIR/message"
        local signoff=()
        [ "${SIGNOFF:-0}" = 1 ] && signoff=(--signoff)
        git -C "$CHECKOUT" apply --unidiff-zero --check --index "$patch" \
            || return 1
        git -C "$CHECKOUT" apply --unidiff-zero --index "$patch" || return 1
        git mailinfo "$WORKDIR/body" /dev/null < "$patch" > "$info" \
            || return 1
        { sed -n 's/^Subject: //p' "$info"; echo; cat "$WORKDIR/body"; } \
            > "$message"
        git -C "$CHECKOUT" commit -q "${signoff[@]}" -F "$message" \
            || return 1
        echo "    committed: $(git -C "$CHECKOUT" log -1 --format='%h %s')"
        hunk_check "$CHECKOUT" HEAD~1 HEAD "$patch"
    }

    for patch in "${PATCHES[@]}"; do
        log "applying and committing $(basename "$patch")"
        if ! commit_patch "$patch"; then
            echo "failed at $(basename "$patch"); $CHECKOUT goes back to" \
                 "$ORIGIN" >&2
            git -C "$CHECKOUT" reset -q --hard
            git -C "$CHECKOUT" checkout -q "$ORIGIN"
            if [ "${KEEP:-0}" = 1 ]; then
                echo "branch $BRANCH kept, as far as it got" >&2
            else
                git -C "$CHECKOUT" branch -q -D "$BRANCH"
                echo "branch $BRANCH deleted" >&2
            fi
            exit 1
        fi
    done
    log "branch $BRANCH of $CHECKOUT, checked out:"
    git -C "$CHECKOUT" log --oneline "$START..$BRANCH"
    echo "    to send: git review (from $CHECKOUT), or git format-patch" \
         "$START..$BRANCH; amend the author and Signed-off-by first if" \
         "they are not the submitter's"
    STATUS=0
    exit 0
fi

prepare_tree

###########################################################################
# --self-test-hunks: that alone.
###########################################################################
if [ "$MODE" = self-test ]; then
    self_test_hunks "$TREE" "$BASE" && STATUS=0
    exit "$STATUS"
fi

###########################################################################
# The run: the self-test, the virtualenvs, then the stages.
###########################################################################
SELF_TEST=caught
self_test_hunks "$TREE" "$BASE" || SELF_TEST="NOT caught"

cd "$TREE"

# The virtualenv, inside the constraints, once for every stage.
VENV="$WORKDIR/venv"
log "virtualenv with $("$PYTHON" --version) in $VENV"
"$PYTHON" -m venv "$VENV"
PIP="$VENV/bin/pip"
nice -n 19 "$PIP" install -q packaging

FILTERED="$WORKDIR/constraints.txt"
log "constraints: $CONSTRAINTS"
cat > "$WORKDIR/filter-constraints.py" <<'EOF'
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
"$VENV/bin/python" "$WORKDIR/filter-constraints.py" "$CONSTRAINTS" \
    "$FILTERED" requirements.txt test-requirements.txt

log "installing requirements.txt and test-requirements.txt"
nice -n 19 "$PIP" install -q -c "$FILTERED" -r requirements.txt \
    -r test-requirements.txt

# The lint virtualenv, at the versions Ironic's pre-commit pins.
HACKING_REV=$(sed -n '/openstack\/hacking/,/rev:/s/.*rev: *v\{0,1\}//p' \
    .pre-commit-config.yaml | head -1)
RUFF_REV=$(sed -n '/ruff-pre-commit/,/rev:/s/.*rev: *v\{0,1\}//p' \
    .pre-commit-config.yaml | head -1)
LINT_VENV="$WORKDIR/venv-lint"
log "lint virtualenv: hacking==$HACKING_REV, ruff==$RUFF_REV"
"$PYTHON" -m venv "$LINT_VENV"
nice -n 19 "$LINT_VENV/bin/pip" install -q "hacking==$HACKING_REV" \
    "ruff==$RUFF_REV"

# pbr would take a master tree's version from git; the sdist's is that of
# its PKG-INFO, said here as well since the tree is now a git repository.
if [ "$TARGET" = 39.0.0 ]; then
    export PBR_VERSION=39.0.0
fi

SUMMARY=()
FAILED_STAGES=0
APPLIED=0
BEFORE=$BASE
for i in "${!STAGE_NAMES[@]}"; do
    STAGE=${STAGE_NAMES[$i]}
    STAGE_LAST=${STAGE_PATCHES[$i]}
    SLUG=${STAGE//+/-}
    STAGE_START=$(date +%s)
    NEW_PATCHES=("${PATCHES[@]:$APPLIED:$((STAGE_LAST - APPLIED))}")
    STAGE_SET=("${PATCHES[@]:0:$STAGE_LAST}")
    log "stage $STAGE: $(for p in "${STAGE_SET[@]}"; do
        basename "$p" | cut -c1-4; done | paste -sd+ -) applied"

    # 1 and 2. Apply the stage's new patches, each checked for placement.
    APPLY_OK=1
    HUNKS_OK=1
    for patch in "${NEW_PATCHES[@]}"; do
        log "git apply --unidiff-zero --check --index $(basename "$patch")"
        if ! git apply --unidiff-zero --check --index "$patch"; then
            APPLY_OK=0
            break
        fi
        git apply --unidiff-zero --index "$patch"
        AFTER=$(git write-tree)
        hunk_check "$TREE" "$BEFORE" "$AFTER" "$patch" || HUNKS_OK=0
        BEFORE=$AFTER
    done
    if [ "$APPLY_OK" -eq 0 ]; then
        SUMMARY+=("stage $STAGE: a patch does not apply; stage not run")
        FAILED_STAGES=$((FAILED_STAGES + 1))
        break
    fi
    APPLIED=$STAGE_LAST

    # 3. The tree, installed in development mode when its metadata moves.
    if [ "$i" -eq 0 ] || touched "${NEW_PATCHES[@]}" \
            | grep -qxE 'pyproject\.toml|setup\.cfg|setup\.py'; then
        log "installing the patched tree (editable)"
        nice -n 19 "$PIP" install -q -c "$FILTERED" --no-deps -e .
    else
        log "the stage changes no package metadata: the editable install" \
            "serves as it is"
    fi
    "$VENV/bin/python" - <<'EOF'
from importlib import metadata
eps = metadata.entry_points(group='ironic.hash_ring_managers')
print('    ironic %s; ironic.hash_ring_managers: %s' % (
    metadata.version('ironic'),
    ', '.join('%s=%s' % (ep.name, ep.value) for ep in eps) or 'none'))
EOF

    TOUCHED=$(touched "${STAGE_SET[@]}")
    PY_FILES=$(echo "$TOUCHED" | grep '\.py$' || true)
    TEST_MODULES=$(echo "$TOUCHED" \
        | grep -E '^ironic/tests/.*/test_[a-z0-9_]+\.py$' \
        | sed -e 's|\.py$||' -e 's|/|\\.|g' || true)
    STAGE_REGEX=${TEST_REGEX:-"^($(echo "$TEST_MODULES" | paste -sd '|' -))\."}

    # 4. The unit tests of the touched test modules (stopped, with the
    # test process, after TEST_TIMEOUT seconds).
    log "stage $STAGE: stestr run --concurrency 1 '$STAGE_REGEX'"
    TEST_LOG="$WORKDIR/stestr-$SLUG.log"
    TEST_START=$(date +%s)
    TEST_RC=0
    nice -n 19 timeout --kill-after=30 "${TEST_TIMEOUT:-900}" \
        "$VENV/bin/stestr" run --concurrency 1 "$STAGE_REGEX" \
        > "$TEST_LOG" 2>&1 || TEST_RC=$?
    TEST_SECONDS=$(( $(date +%s) - TEST_START ))
    grep -E '^(FAIL|ERROR):| \.\.\. FAILED$' "$TEST_LOG" || true
    # stestr's own count lines, as they are: what CI's report adds up.
    grep -E '^ - (Passed|Failed|Skipped): [0-9]+$' "$TEST_LOG" || true
    RAN=$(sed -n 's/^Ran: \([0-9]*\) tests.*/\1/p' "$TEST_LOG" | tail -1)
    PASSED=$(sed -n 's/^ - Passed: \([0-9]*\)/\1/p' "$TEST_LOG" | tail -1)
    FAILED=$(sed -n 's/^ - Failed: \([0-9]*\)/\1/p' "$TEST_LOG" | tail -1)
    SKIPPED=$(sed -n 's/^ - Skipped: \([0-9]*\)/\1/p' "$TEST_LOG" | tail -1)
    # Tests whose process died under them (stestr lists them after its
    # totals), and a run stopped by the timeout.
    CRASHED=$(sed -n '/exited without returning a status/,$s/^\t\* //p' \
        "$TEST_LOG")
    UNFINISHED=$(echo "$CRASHED" | grep -c . || true)
    if [ "$TEST_RC" -eq 124 ] || [ "$TEST_RC" -eq 137 ]; then
        echo "    stestr stopped after ${TEST_TIMEOUT:-900} s; last test" \
             "line: $(grep -E '^\{[0-9]+\} ' "$TEST_LOG" | tail -1)"
        UNFINISHED="${UNFINISHED} + timeout"
    fi
    if [ -n "$CRASHED" ]; then
        echo "    did not finish (the test process died):"
        while read -r test_id; do
            echo "        $test_id"
        done <<< "$CRASHED"
    fi
    if [ "$TEST_RC" -ne 0 ]; then
        # The failures' output as stestr gives it, or the log's end.
        if grep -q '^Failed [0-9]* tests - output below' "$TEST_LOG"; then
            sed -n '/^Failed [0-9]* tests - output below/,/^Totals$/p' \
                "$TEST_LOG" | head -120
        else
            grep -v '^WARNING: Location' "$TEST_LOG" | tail -30
        fi
    fi
    echo "    stage $STAGE: tests run ${RAN:-?}, passed ${PASSED:-?}," \
         "failed ${FAILED:-?}, skipped ${SKIPPED:-?}, did not finish" \
         "${UNFINISHED}, wall time ${TEST_SECONDS} s (stestr exit status" \
         "$TEST_RC)"

    # 5. Ironic's pep8 checks over the touched files.
    log "stage $STAGE: flake8 (hacking), ruff, check-releasenotes"
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

    STAGE_SECONDS=$(( $(date +%s) - STAGE_START ))
    HUNKS_WORD="in place"
    [ "$HUNKS_OK" -eq 1 ] || HUNKS_WORD=MISPLACED
    LINT_WORD=clean
    [ "$LINT_RC" -eq 0 ] || LINT_WORD=FAILED
    LINE="stage $STAGE: applied; hunks $HUNKS_WORD; tests run ${RAN:-?},"
    LINE+=" passed ${PASSED:-?}, failed ${FAILED:-?}, did not finish"
    LINE+=" $UNFINISHED in ${TEST_SECONDS} s (stestr exit status $TEST_RC);"
    LINE+=" lint $LINT_WORD; stage wall time ${STAGE_SECONDS} s"
    SUMMARY+=("$LINE")
    if [ "$HUNKS_OK" -ne 1 ] || [ "$TEST_RC" -ne 0 ] \
            || [ "$LINT_RC" -ne 0 ]; then
        FAILED_STAGES=$((FAILED_STAGES + 1))
    fi
done

log "summary for $TARGET (whole run: ${SECONDS} s):"
echo "    self-test of the hunk check: moved hunk $SELF_TEST"
for line in "${SUMMARY[@]}"; do
    echo "    $line"
done
if [ "$FAILED_STAGES" -eq 0 ] && [ "$APPLIED" -eq "${#PATCHES[@]}" ] \
        && [ "$SELF_TEST" = caught ]; then
    STATUS=0
fi
exit "$STATUS"
