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

"""A PostgreSQL server of the test's own, which the test may stop.

The machine's PostgreSQL serves other work, so a database outage is
played on a private cluster: initdb in a temporary folder, the server on
a free loopback port, stopped (fast shutdown: sessions are cut, as in a
crash or a failover) and started again on the same folder and port.
PostgreSQL refuses to run as root, so under root it runs as the
``postgres`` account the Debian package creates.
"""

import glob
import os
import pwd
import signal
import subprocess
import tempfile
from typing import Any

import fixtures
import testtools

from ironic_affinity.tests.functional import servers

# Read at import, before a test points TMPDIR at a folder of its own that
# only root may enter: the server's account must reach its data folder.
_SHARED_TMP = tempfile.gettempdir()


def _bin_dir() -> str | None:
    found = sorted(
        glob.glob('/usr/lib/postgresql/*/bin/postgres'),
        key=lambda path: int(path.split('/')[4]),
    )
    return os.path.dirname(found[-1]) if found else None


class PostgresServer(fixtures.Fixture):
    """A throwaway PostgreSQL cluster; ``url`` is a SQLAlchemy base URL."""

    def _setUp(self) -> None:
        self.bin = _bin_dir()
        if self.bin is None:
            if os.environ.get('IRONIC_AFFINITY_REQUIRE_SERVERS'):
                raise AssertionError('PostgreSQL server programs missing')
            raise testtools.TestCase.skipException(
                'PostgreSQL server programs are not installed'
            )
        self.dir = self.useFixture(fixtures.TempDir(_SHARED_TMP)).path
        self._as: dict[str, Any] = {}
        if os.getuid() == 0:
            account = pwd.getpwnam('postgres')
            os.chown(self.dir, account.pw_uid, account.pw_gid)
            self._as = {'user': account.pw_uid, 'group': account.pw_gid}
        self.data = os.path.join(self.dir, 'data')
        subprocess.run(
            [
                os.path.join(self.bin, 'initdb'),
                '-D',
                self.data,
                '-U',
                'postgres',
                '-A',
                'trust',
                '--no-sync',
            ],  # fmt: skip
            check=True,
            capture_output=True,
            timeout=120,
            **self._as,
        )
        self.port = servers.free_port()
        self.process: subprocess.Popen[bytes] | None = None
        self.start()
        self.addCleanup(self.stop)

    @property
    def url(self) -> str:
        return 'postgresql+psycopg2://postgres@127.0.0.1:%d' % self.port

    def start(self) -> None:
        log = open(os.path.join(self.dir, 'server.log'), 'ab')
        self.process = subprocess.Popen(
            [
                os.path.join(self.bin, 'postgres'),
                '-D',
                self.data,
                '-p',
                str(self.port),
                '-k',
                self.dir,
                '-c',
                'listen_addresses=127.0.0.1',
                '-c',
                'fsync=off',
                '-c',
                'max_connections=200',
            ],  # fmt: skip
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            **self._as,
        )
        log.close()
        servers.wait_for_port(self.port, 60)

    def stop(self) -> None:
        """Fast shutdown: every session is cut, nothing is waited for."""
        if self.process is None:
            return
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
            try:
                self.process.wait(30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(15)
        self.process = None
