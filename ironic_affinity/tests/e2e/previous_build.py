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

"""The build a rolling upgrade starts from.

The commit named in tools/upgrade/previous-build, taken from this
repository's own history and installed, without its dependencies, into
a folder of its own. A process of the deployment that runs it puts that
folder first on its PYTHONPATH, beside the same Ironic and libraries:
what an upgrade of the package in place leaves behind it, one process
at a time.
"""

import fcntl
import os
import shutil
import subprocess
import sys
import tempfile

REPOSITORY = os.path.abspath(
    os.path.join(os.path.dirname(__file__), '..', '..', '..')
)
COMMIT_FILE = os.path.join(REPOSITORY, 'tools', 'upgrade', 'previous-build')


def commit() -> str:
    """The commit named in the file: its one line that is not a
    comment."""
    with open(COMMIT_FILE) as handle:
        (found,) = [
            line.strip()
            for line in handle
            if line.strip() and not line.startswith('#')
        ]
    return found


def path() -> str:
    """The folder holding the previous build, built once per virtualenv
    and commit (about 20 s), whichever test process asks first."""
    sha = commit()
    target = os.path.join(sys.prefix, 'previous-build-%s' % sha[:12])
    with open(target + '.lock', 'w') as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not os.path.isdir(target):
            _build(sha, target)
    return target


def _build(sha: str, target: str) -> None:
    with tempfile.TemporaryDirectory() as work:
        source = os.path.join(work, 'source')
        # A clone, not an archive: pbr reads the version from git.
        for command in (
            ['git', 'clone', '-q', '--no-checkout', REPOSITORY, source],
            ['git', '-C', source, 'checkout', '-q', sha],
        ):
            subprocess.run(command, check=True, capture_output=True)
        partial = target + '.partial'
        shutil.rmtree(partial, ignore_errors=True)
        subprocess.run(
            [
                sys.executable,
                '-m',
                'pip',
                'install',
                '-q',
                '--no-deps',
                '--no-build-isolation',
                '--target',
                partial,
                source,
            ],
            check=True,
            capture_output=True,
        )
        os.rename(partial, target)


def environment(build: str | None) -> dict[str, str] | None:
    """The environment of a process that runs ``build`` (a folder from
    :func:`path`); None, the test's own, for this checkout."""
    if build is None:
        return None
    found = dict(os.environ)
    found['PYTHONPATH'] = os.pathsep.join(
        filter(None, (build, os.environ.get('PYTHONPATH')))
    )
    return found
