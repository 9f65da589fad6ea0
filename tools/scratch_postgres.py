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

"""A PostgreSQL cluster of a benchmark's own, for one run.

The machine's PostgreSQL is shared and sized for the tests (100
connections), and dozens of conductors need more: each process of each
conductor keeps a pool. This cluster is made for one run, in a temporary
folder: initdb, trust authentication on the loopback (as the shared
server has), a free port, its sockets in that folder, more connections;
started and stopped with pg_ctl, then removed.

To keep its figures comparable with the shared server's, it takes that
server's major version, locale and the settings of its configuration
file (autovacuum among them), but for those that name a server and
max_connections; nothing else is tuned. The end-to-end fault tests'
cluster (ironic_affinity/tests/e2e/postgres.py) runs without fsync, for
speed, which would not compare.

PostgreSQL refuses to run as root: under root, initdb and the server run
as the ``postgres`` account the Debian package creates, through runuser.
"""

import dataclasses
import glob
import os
import pwd
import shutil
import signal
import subprocess
import tempfile
import time

import sqlalchemy as sa

from ironic_affinity.tests.functional import servers

ACCOUNT = 'postgres'
# Settings of the template server not copied: what names a server (two
# clusters must not share a port, a socket, a pid file) and what the
# scratch cluster sets itself.
NOT_COPIED = frozenset(
    (
        'cluster_name',
        'config_file',
        'data_directory',
        'external_pid_file',
        'hba_file',
        'ident_file',
        'listen_addresses',
        'max_connections',
        'port',
        'unix_socket_directories',
    )
)


@dataclasses.dataclass
class Template:
    """What a scratch cluster takes from another server."""

    major: int | None = None
    locale: str = 'C.UTF-8'
    encoding: str = 'UTF8'
    # name -> value (with its unit), as postgresql.conf takes it.
    settings: dict[str, str] = dataclasses.field(default_factory=dict)


def template_of(url: str) -> Template:
    """The template a server makes: its version, template1's locale and
    encoding, and what its configuration file sets (see NOT_COPIED).

    :param url: SQLAlchemy base URL of the server, without a database.
    """
    engine = sa.create_engine(url + '/postgres', poolclass=sa.pool.NullPool)
    try:
        with engine.connect() as connection:
            version = connection.execute(
                sa.text("SELECT current_setting('server_version_num')")
            ).scalar_one()
            locale, encoding = connection.execute(
                sa.text(
                    'SELECT datcollate, pg_encoding_to_char(encoding) '
                    "FROM pg_database WHERE datname = 'template1'"
                )
            ).one()
            settings = connection.execute(
                sa.text(
                    'SELECT name, current_setting(name) FROM pg_settings '
                    "WHERE source = 'configuration file' ORDER BY name"
                )
            ).all()
    finally:
        engine.dispose()
    return Template(
        major=int(version) // 10000,
        locale=locale,
        encoding=encoding,
        settings={
            name: value for name, value in settings if name not in NOT_COPIED
        },
    )


def bin_dir(major: int | None) -> str:
    """Debian's folder of PostgreSQL ``major``'s programs, or of the
    newest installed when that one is not."""
    found = {
        int(path.split('/')[4]): os.path.dirname(path)
        for path in glob.glob('/usr/lib/postgresql/*/bin/initdb')
    }
    if major in found:
        return found[major]
    if found:
        return found[max(found)]
    initdb = shutil.which('initdb')
    if initdb is None:
        raise RuntimeError('PostgreSQL server programs are not installed')
    return os.path.dirname(os.path.realpath(initdb))


def _quote(value: str) -> str:
    return "'%s'" % value.replace("'", "''")


class ScratchPostgres:
    """A throwaway cluster, as a context manager: started on enter,
    stopped and removed on exit, whatever ends the ``with``."""

    def __init__(
        self, template: Template | None = None, max_connections: int = 500
    ) -> None:
        self.template = template or Template()
        self.max_connections = max_connections
        self.bin = bin_dir(self.template.major)
        self.dir = ''
        self.port = 0
        self.pid = 0

    @property
    def data(self) -> str:
        return os.path.join(self.dir, 'data')

    @property
    def url(self) -> str:
        """SQLAlchemy base URL, without a database."""
        return 'postgresql+psycopg2://postgres@127.0.0.1:%d' % self.port

    def __enter__(self) -> 'ScratchPostgres':
        self.dir = tempfile.mkdtemp(prefix='scratch-postgres-')
        try:
            if os.getuid() == 0:
                account = pwd.getpwnam(ACCOUNT)
                os.chown(self.dir, account.pw_uid, account.pw_gid)
            self._initdb()
            self._configure()
            self._start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def _run(self, program: str, *args: str, timeout: float = 120) -> None:
        """Run one of the server's programs, as ACCOUNT under root; its
        output goes into the error when it fails."""
        command = [os.path.join(self.bin, program), *args]
        if os.getuid() == 0:
            command = ['runuser', '-u', ACCOUNT, '--', *command]
        done = subprocess.run(
            command,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        if done.returncode != 0:
            raise RuntimeError(
                '%s failed (%d): %s%s'
                % (program, done.returncode, done.stdout, done.stderr)
            )

    def _initdb(self) -> None:
        # Trust for local and host connections alike: the shared
        # server's pg_hba trusts 127.0.0.1, which every URL here uses.
        # --no-sync: a cluster for one run need not survive a crash of
        # the machine; the server itself runs with fsync as configured.
        self._run(
            'initdb',
            '--pgdata', self.data,
            '--username', 'postgres',
            '--auth', 'trust',
            '--locale', self.template.locale,
            '--encoding', self.template.encoding,
            '--no-sync',
        )  # fmt: skip

    def _configure(self) -> None:
        """Append the template's settings and this cluster's own to the
        postgresql.conf initdb wrote (the last of a name wins)."""
        self.port = servers.free_port()
        own = {
            'listen_addresses': '127.0.0.1',
            'port': str(self.port),
            'unix_socket_directories': self.dir,
            'max_connections': str(self.max_connections),
            # In every process title, as ``15/main`` is in the shared
            # server's: which cluster a process is, in ps.
            'cluster_name': 'scratch-%d' % self.port,
        }
        lines = ['', '# ' + self.__class__.__name__]
        for name, value in dict(self.template.settings, **own).items():
            lines.append('%s = %s' % (name, _quote(value)))
        with open(os.path.join(self.data, 'postgresql.conf'), 'a') as handle:
            handle.write('\n'.join(lines) + '\n')

    def _start(self) -> None:
        log = os.path.join(self.dir, 'server.log')
        try:
            self._run(
                'pg_ctl',
                '--pgdata', self.data,
                '--log', log,
                '--wait',
                '--timeout', '60',
                'start',
            )  # fmt: skip
        except RuntimeError as exc:
            # pg_ctl says only "examine the log output".
            with open(log, errors='replace') as handle:
                raise RuntimeError('%s\n%s' % (exc, handle.read())) from exc
        self.pid = self._postmaster()

    def _postmaster(self) -> int:
        """The postmaster's pid, from the file it keeps while it runs; 0
        when there is none."""
        try:
            with open(os.path.join(self.data, 'postmaster.pid')) as handle:
                return int(handle.readline())
        except (FileNotFoundError, ValueError):
            return 0

    def stop(self) -> None:
        """Fast shutdown (sessions cut, nothing waited for), else kill;
        then remove the folder. Safe to call twice, and after a start
        that failed half-way (the postmaster's file says whether a server
        runs, not what this object knows)."""
        if self.dir and self._postmaster():
            try:
                self._run(
                    'pg_ctl', '--pgdata', self.data, '--mode', 'fast',
                    '--wait', '--timeout', '60', 'stop',
                )  # fmt: skip
            except (RuntimeError, subprocess.TimeoutExpired):
                self._kill(self._postmaster())
        self.pid = 0
        if self.dir:
            shutil.rmtree(self.dir, ignore_errors=True)
            self.dir = ''

    @staticmethod
    def _kill(postmaster: int) -> None:
        """SIGKILL the postmaster and its children; the children would
        end on their own once they see it gone, but not at once.

        Not when the pid is no longer a PostgreSQL process: the file of
        a server that died names a pid the system may have given again.
        """
        try:
            with open('/proc/%d/comm' % postmaster) as handle:
                if handle.read().strip() != 'postgres':
                    return
        except FileNotFoundError:
            return
        children = subprocess.run(
            ['pgrep', '-P', str(postmaster)],
            capture_output=True,
            text=True,
            check=False,
        ).stdout.split()
        for pid in [postmaster] + [int(c) for c in children]:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline and os.path.exists(
            '/proc/%d' % postmaster
        ):
            time.sleep(0.1)
