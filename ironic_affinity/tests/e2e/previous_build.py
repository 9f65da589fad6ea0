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

"""What a rolling upgrade starts from: a :class:`Build` per process.

The plugin's previous build (:func:`plugin`): the commit named in
tools/upgrade/previous-build, taken from this repository's own history
and installed, without its dependencies, into a folder of its own. A
process that runs it puts that folder first on its PYTHONPATH, beside
the same Ironic and libraries: what an upgrade of the package in place
leaves behind it, one process at a time.

Ironic's previous release (:func:`ironic`): a virtualenv of its own,
inside that release's upper-constraints, with this checkout's plugin.
A process that runs it starts the same command from that virtualenv.
"""

import dataclasses
import fcntl
import os
import shutil
import subprocess
import sys
import tempfile

from ironic_affinity.tests.functional import servers

REPOSITORY = os.path.abspath(
    os.path.join(os.path.dirname(__file__), '..', '..', '..')
)
COMMIT_FILE = os.path.join(REPOSITORY, 'tools', 'upgrade', 'previous-build')
CONSTRAINTS = os.path.join(
    REPOSITORY, 'tools', 'constraints', 'upper-constraints-%s.txt'
)


@dataclasses.dataclass(frozen=True)
class Build:
    """What a process of a deployment runs; the defaults, the test's
    own virtualenv and this checkout.

    :param bin: the bin folder of another virtualenv (another Ironic),
        whose commands the process runs instead of the test's own.
    :param path: a folder first on the process's PYTHONPATH (a previous
        build of the plugin).
    """

    bin: str | None = None
    path: str | None = None

    def command(self, command: list[str]) -> list[str]:
        """``command``, a program of the test's own virtualenv and its
        arguments, as this build runs it."""
        if self.bin is None:
            return command
        program = os.path.join(self.bin, os.path.basename(command[0]))
        return [program, *command[1:]]

    def environment(self) -> dict[str, str] | None:
        """The process's environment; None, the test's own, when the
        build adds nothing to PYTHONPATH."""
        if self.path is None:
            return None
        found = dict(os.environ)
        found['PYTHONPATH'] = os.pathsep.join(
            filter(None, (self.path, os.environ.get('PYTHONPATH')))
        )
        return found


CURRENT = Build()


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


def plugin() -> Build:
    """The plugin's previous build, beside the test's own Ironic: built
    once per virtualenv and commit (about 20 s), whichever test process
    asks first."""
    sha = commit()
    target = os.path.join(sys.prefix, 'previous-build-%s' % sha[:12])
    with open(target + '.lock', 'w') as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not os.path.isdir(target):
            _build(sha, target)
    return Build(path=target)


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


def ironic(series: str, version: str) -> Build:
    """Ironic ``version`` inside the upper-constraints of ``series``
    (tools/constraints/), with this checkout's plugin, in a virtualenv
    of its own: built once per test virtualenv (about two minutes),
    whichever test process asks first."""
    target = os.path.join(sys.prefix, 'ironic-%s' % version)
    # A virtualenv cannot be moved once made: this file says it is whole.
    whole = os.path.join(target, 'installed')
    with open(target + '.lock', 'w') as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not os.path.exists(whole):
            shutil.rmtree(target, ignore_errors=True)
            subprocess.run(
                [sys.executable, '-m', 'venv', target],
                check=True,
                capture_output=True,
            )
            # The test's own constraints (tox's) do not apply there.
            env = {
                k: v for k, v in os.environ.items() if k != 'PIP_CONSTRAINT'
            }
            servers.run(
                [os.path.join(target, 'bin', 'python'), '-m', 'pip']
                + ['install', '-q', '-c', CONSTRAINTS % series]
                + ['ironic==%s' % version, 'psycopg2-binary', REPOSITORY],
                timeout=900,
                env=env,
            )
            open(whole, 'w').close()
    return Build(bin=os.path.join(target, 'bin'))
