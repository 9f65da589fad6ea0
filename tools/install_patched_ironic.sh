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
# install_patched_ironic.sh VERSION PYTHON: install Ironic VERSION, from
# its sdist, with contrib/ironic/VERSION/*.patch applied (the pluggable
# hash-ring manager), into the environment of PYTHON. For tox's
# e2e-ironic-hook environment (commands_pre).
#
# Idempotent: a stamp in the environment records the sdist and the
# patch it installed; a second run with the same ones does nothing, so
# that a rerun of the environment costs no download and no build.

set -euo pipefail

version=${1:?usage: install_patched_ironic.sh VERSION PYTHON}
python=${2:?usage: install_patched_ironic.sh VERSION PYTHON}
here=$(cd "$(dirname "$0")/.." && pwd)
patches=("$here"/contrib/ironic/"$version"/*.patch)
[ -e "${patches[0]}" ] || {
    echo "no patch for Ironic $version in contrib/ironic/$version" >&2
    exit 2
}

envdir=$("$python" -c 'import sys; print(sys.prefix)')
stamp=$envdir/ironic-hook.stamp
wanted="ironic $version $(cat "${patches[@]}" | sha256sum | cut -d' ' -f1)"
if [ -e "$stamp" ] && [ "$(cat "$stamp")" = "$wanted" ]; then
    echo "patched Ironic $version already installed"
    exit 0
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$python" -m pip download --quiet --no-deps --no-binary ironic \
    --dest "$work" "ironic==$version"
tar --no-same-owner -xzf "$work"/ironic-"$version".tar.gz -C "$work"
tree=$work/ironic-$version
# pbr lists the package's data files (the database migrations' alembic
# files among them) from git, or else from the egg-info, which predates
# the patch and holds its entry points as they were: a git tree of the
# sdist as released, then, without it.
rm -rf "$tree"/*.egg-info
git -C "$tree" init --quiet
git -C "$tree" add --all
git -C "$tree" -c user.name=ci -c user.email=ci@localhost \
    commit --quiet --message "ironic $version as released"
for patch in "${patches[@]}"; do
    # The patches carry no context lines (contrib/ironic/README.rst).
    git -C "$tree" apply --unidiff-zero --check "$patch"
    git -C "$tree" apply --unidiff-zero --index "$patch"
    echo "applied $(basename "$patch")"
done
# pbr takes the version from PKG-INFO, there being no git history.
# Ironic's requirements are those of the same release, installed with it
# from the index (tox.ini): only Ironic itself is replaced.
PBR_VERSION=$version "$python" -m pip install --quiet --no-deps \
    --force-reinstall "$tree"
"$python" - <<'EOF'
from ironic.common import hash_ring

hash_ring.get_hash_ring_manager_class  # the loader: else AttributeError
hash_ring.BaseHashRingManager.conductor_started  # and the conductor hooks
print('Ironic has the pluggable hash-ring manager')
EOF
echo "$wanted" > "$stamp"
