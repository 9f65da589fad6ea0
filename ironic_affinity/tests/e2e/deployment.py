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

"""A real multi-conductor Ironic on this machine, for end-to-end tests.

One API and N conductors of Ironic 39, started through our console
scripts (ironic-affinity-api, ironic-affinity-conductor) exactly as an
operator would, on a fresh PostgreSQL database and a Redis of their own
for membership; fake hardware, json-rpc, CI-speed Ironic timers. The
API runs without authentication, with Ironic's http_basic, or with its
keystone strategy against a Keystone fixture (keystone_server.py). Every
process is stopped by pid and the database dropped on clean-up.
"""

import atexit
import base64
import datetime
import functools
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import typing
import urllib.error
import urllib.request
import uuid

import fixtures
import sqlalchemy as sa

from ironic_affinity.integration.data import ironic_db
from ironic_affinity.tests.e2e import cut_proxy
from ironic_affinity.tests.e2e import keystone_server
from ironic_affinity.tests.e2e import machine_share
from ironic_affinity.tests.e2e import previous_build
from ironic_affinity.tests.functional import servers

API_VERSION = {'X-OpenStack-Ironic-API-Version': 'latest'}
POSTGRES = os.environ.get(
    'IRONIC_AFFINITY_E2E_POSTGRES', 'postgresql+psycopg2://postgres@127.0.0.1'
)
# Kolla-Ansible's database server; for ironic_db's cases only.
MARIADB = os.environ.get(
    'IRONIC_AFFINITY_MARIADB', 'mysql+pymysql://root@127.0.0.1:3306'
)
FIRST_RPC_PORT = 8091
# Added to every conductor's RPC port (and so to its name): each
# release's suite in tox.ini has a block of its own, so that the suites
# of several releases can run side by side on one machine (.ci/run does).
PORT_OFFSET = int(os.environ.get('IRONIC_AFFINITY_E2E_PORT_OFFSET', '0'))
# The test processes of one suite may run side by side too (stestr
# --concurrency): each claims a slot, a lock it holds while it lives,
# and adds SLOT_PORTS times its number. Three slots keep every port
# below the kernel's ephemeral range (32768), where free ports are.
SLOT_PORTS = 10000
SLOTS = 3
_slot: list[tuple[int, typing.IO[str]]] = []


def port_slot() -> int:
    """This process's slot among the suite's (0 when it runs alone)."""
    if not _slot:
        for index in range(SLOTS):
            handle = machine_share.try_lock(
                'ports-%d-%d' % (PORT_OFFSET, index)
            )
            if handle is None:
                continue
            # Held, with the file open, until the process ends.
            _slot.append((index, handle))
            break
        else:
            raise RuntimeError(
                'more than %d end-to-end test processes of one suite' % SLOTS
            )
    return _slot[0][0]


_COMMON = """
[DEFAULT]
{auth}
{hook}
rpc_transport = json-rpc
enabled_hardware_types = fake-hardware
enabled_bios_interfaces = fake
enabled_boot_interfaces = fake
enabled_console_interfaces = fake
enabled_deploy_interfaces = fake
enabled_firmware_interfaces = fake
enabled_inspect_interfaces = fake
enabled_management_interfaces = fake
enabled_power_interfaces = fake
enabled_raid_interfaces = fake
enabled_rescue_interfaces = fake
enabled_vendor_interfaces = fake
enabled_network_interfaces = noop
enabled_storage_interfaces = noop
default_network_interface = noop
hash_ring_reset_interval = {reset}
debug = true
state_path = {state}

[api]
host_ip = 127.0.0.1
port = {api_port}
api_workers = 1
{middleware}

[database]
connection = {database}

[json_rpc]
auth_strategy = noauth
host_ip = 127.0.0.1

[dhcp]
dhcp_provider = none

[conductor]
automated_clean = false
heartbeat_interval = {heartbeat}
heartbeat_timeout = {heartbeat_timeout}
sync_power_state_interval = 2

[affinity]
backend_url = {backend}
group_name = e2e
hash_ring_manager = {manager}
"""

# Ironic's timers: CI speed, or Ironic's defaults for a fair comparison
# of failover with and without the plugin.
CI_TIMERS = {'reset': 2, 'heartbeat': 1, 'heartbeat_timeout': 5}
IRONIC_DEFAULT_TIMERS = {'reset': 15, 'heartbeat': 10, 'heartbeat_timeout': 60}

# Seconds between two tries of a wait that runs the ironic-affinity
# command (about 1 CPU second a run): a tighter loop kept a core busy
# for the whole wait, slowing every suite running beside it.
CLI_POLL = 1.0

_POWER_SYNC = re.compile(
    r'Attempting to get shared lock on node (\S+) \(for power state sync\)'
)
_TIMED_POWER_SYNC = re.compile(
    r'^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3}) .*(?:Attempting to get '
    r'shared lock on node (\S+) \(for power state sync\)|(Completed) power '
    r'state sync operation, evaluated \d+ nodes(?: with \d+ workers in '
    r'([\d.]+) seconds)?)',
    re.MULTILINE,
)


def _bin(name: str) -> str:
    return os.path.join(os.path.dirname(sys.executable), name)


# The command line of the API process, by Deployment's api parameter.
API_MODES = {
    'launcher': [_bin('ironic-affinity-api')],
    'middleware': [_bin('ironic-api')],
    'wsgi': [sys.executable, '-m', 'ironic_affinity.tests.e2e.wsgi_server'],
    'plain': [_bin('ironic-api')],
}


#: Set by tox's e2e-ironic-hook environment, whose Ironic carries the
#: change of contrib/ironic/: the plugin is enabled by ironic.conf alone
#: ([DEFAULT]hash_ring_manager = affinity), every service runs Ironic's
#: own command, and the API has [api]middleware = affinity for the
#: tag checks at its door only. Cases written for the launchers run as
#: they are, with those commands in their place.
IRONIC_HOOK = os.environ.get('IRONIC_AFFINITY_E2E_IRONIC_HOOK') == '1'


def ironic_has_middleware_option() -> bool:
    """Whether this Ironic has [api]middleware (Ironic 35 and later)."""
    from ironic.conf import api as api_options

    return any(opt.name == 'middleware' for opt in api_options.opts)


# (PostgreSQL server URL, the bin folder of the Ironic whose schema) -> a
# database holding that schema, made by its ironic-dbsync once per
# server and test process.
_TEMPLATES: dict[tuple[str, str | None], str] = {}


def _schema_template(
    postgres: str, admin: sa.Engine, build: previous_build.Build
) -> str:
    """The name of a database with Ironic's schema, empty, to copy.

    A deployment's database is a copy of it (CREATE DATABASE ... TEMPLATE,
    done by the server in milliseconds) instead of the output of its own
    ironic-dbsync, a process that imports Ironic: 2.3 CPU seconds each
    time, and up to 12 s on a loaded machine, in every case of every
    release. The copy is the same schema: the same Ironic's dbsync made
    it. Dropped when the process ends.
    """
    key = (postgres, build.bin)
    if key in _TEMPLATES:
        # Unless the server is another one now (a test's own cluster,
        # gone, and a new one on the same free port).
        with admin.connect() as connection:
            found = connection.execute(
                sa.text('SELECT 1 FROM pg_database WHERE datname = :name'),
                {'name': _TEMPLATES[key]},
            ).first()
        if found:
            return _TEMPLATES[key]
    name = 'ironic_affinity_e2e_template_%s' % uuid.uuid4().hex[:10]
    with admin.connect() as connection:
        connection.execute(sa.text('CREATE DATABASE %s' % name))
    atexit.register(_drop_template, postgres, name)
    with tempfile.NamedTemporaryFile('w', suffix='.conf') as conf:
        conf.write('[database]\nconnection = %s/%s\n' % (postgres, name))
        conf.flush()
        subprocess.run(
            build.command(
                [_bin('ironic-dbsync'), '--config-file', conf.name]
                + ['create_schema']
            ),
            check=True,
            capture_output=True,
            timeout=120,
        )
    _TEMPLATES[key] = name
    return name


def _drop_template(postgres: str, name: str) -> None:
    engine = sa.create_engine(
        postgres + '/postgres', isolation_level='AUTOCOMMIT'
    )
    try:
        with engine.connect() as connection:
            connection.execute(
                sa.text('DROP DATABASE IF EXISTS %s WITH (FORCE)' % name)
            )
    except sa.exc.SQLAlchemyError:
        pass  # the server is gone already (a cluster of the test's own)
    finally:
        engine.dispose()


#: CPU seconds of the processes this test process killed without
#: waiting for them (Ironic's forked workers, orphaned when their group
#: is killed): RUSAGE_CHILDREN counts only the processes it waits for.
#: base.TestCase adds both to each case's figures.
orphans_cpu = [0.0]


def _stat(pid: int) -> list[str] | None:
    """The fields of /proc/PID/stat after the command's name (the
    state, field 3, first); None once the process has ended."""
    try:
        with open('/proc/%d/stat' % pid) as handle:
            return handle.read().rpartition(')')[2].split()
    except OSError:
        return None


def _group(pgid: int) -> set[int]:
    """The live processes of a process group (field 5)."""
    found = set()
    for entry in os.listdir('/proc'):
        if entry.isdigit():
            fields = _stat(int(entry))
            if fields is not None and int(fields[2]) == pgid:
                found.add(int(entry))
    return found


def cpu_seconds(pids: typing.Iterable[int]) -> float:
    """User and system CPU seconds the processes have used so far."""
    total = 0
    for pid in pids:
        fields = _stat(pid)
        if fields is not None:
            # utime and stime, the 14th and 15th fields of the line.
            total += int(fields[11]) + int(fields[12])
    return total / os.sysconf('SC_CLK_TCK')


class Deployment(fixtures.Fixture):
    """API + conductors; conductor i is named 127.0.0.1:(first_rpc_port +
    PORT_OFFSET + SLOT_PORTS * port_slot() + i - 1).

    Conductor names are fixed ports, not free ones, so that a conductor
    restarted under test comes back under the same name, as in production.
    A script running beside the tests (the soak) passes another block.
    """

    def __init__(
        self,
        manager: str = 'affinity',
        timers: dict[str, int] | None = None,
        api: str = 'launcher',
        first_rpc_port: int = FIRST_RPC_PORT,
        postgres: str = POSTGRES,
        credentials: tuple[str, str] | None = None,
        extra_conf: str = '',
        keystone: keystone_server.KeystoneServer | None = None,
        cuttable: bool = False,
        plain_when_stock: bool = True,
        build: previous_build.Build | None = None,
    ) -> None:
        """:param api: how the API runs: 'launcher' (ironic-affinity-api);
        'middleware' (Ironic's own ironic-api with [api]middleware =
        affinity, Ironic 35 and later); 'wsgi' (our WSGI application
        in a WSGI server, as uwsgi would serve it); 'plain' (Ironic's
        own ironic-api without the plugin: a misconfiguration the
        upgrade check must catch).
        :param credentials: (user, password): the API authenticates with
            Ironic's http_basic strategy, and this harness's requests
            send them; by default the API runs without authentication.
        :param extra_conf: appended to every process's ironic.conf.
        :param keystone: a running Keystone: the API authenticates with
            Ironic's keystone strategy against it (keystonemiddleware,
            and Ironic's policy enforced), and this harness's requests
            send its admin's system-scoped token.
        :param cuttable: each process reaches Redis and PostgreSQL
            through proxies of its own, which :meth:`cut` cuts.
        :param plain_when_stock: with ``manager='stock'``, run Ironic's
            own commands, the baseline that cases and tools compare the
            plugin with: a service started through the plugin with
            ``stock`` votes for Ironic's ring but still runs the plugin's
            membership and tag cache.
        :param build: what the API starts on, and the Ironic whose
            ironic-dbsync makes the database (previous_build); None
            for the test's own."""
        super().__init__()
        if api not in API_MODES:
            raise ValueError('api must be one of %s' % sorted(API_MODES))
        self.plain = plain_when_stock and manager == 'stock'
        if self.plain and api == 'launcher':
            api = 'plain'
        if IRONIC_HOOK and api == 'launcher':
            api = 'middleware'
        self.api = api
        self.first_rpc_port = (
            first_rpc_port + PORT_OFFSET + SLOT_PORTS * port_slot()
        )
        #: SQLAlchemy URL of the PostgreSQL server, without a database.
        self.postgres = postgres
        self.manager = manager
        self.timers = CI_TIMERS if timers is None else timers
        self.credentials = credentials
        self.extra_conf = extra_conf
        self.keystone = keystone
        self.cuttable = cuttable
        self.build = build or previous_build.CURRENT
        #: Process name -> server ('redis' or 'database') -> its proxy.
        self.proxies: dict[str, dict[str, cut_proxy.CutProxy]] = {}
        if keystone is not None and credentials is not None:
            raise ValueError('credentials are for http_basic, not Keystone')

    def _setUp(self) -> None:
        self.dir = self.useFixture(fixtures.TempDir()).path
        keep = os.environ.get('IRONIC_AFFINITY_E2E_KEEP_LOGS')
        if keep:
            # Before the directory goes: every process's log, to read
            # after a failure that does not happen when watched.
            self.addCleanup(
                shutil.copytree,
                self.dir,
                os.path.join(keep, os.path.basename(self.dir)),
                ignore=shutil.ignore_patterns('state'),
            )
        self.redis = self.useFixture(servers.RedisServer())
        self.dbname = 'ironic_affinity_e2e_%s' % uuid.uuid4().hex[:10]
        self.database_url = '%s/%s' % (self.postgres, self.dbname)
        # pre-ping: a test may restart the server under this engine.
        admin = sa.create_engine(
            self.postgres + '/postgres',
            isolation_level='AUTOCOMMIT',
            pool_pre_ping=True,
        )
        template = _schema_template(self.postgres, admin, self.build)
        with admin.connect() as connection:
            connection.execute(
                sa.text(
                    'CREATE DATABASE %s TEMPLATE %s' % (self.dbname, template)
                )
            )
        self.addCleanup(self._drop_database, admin)
        self.api_port = servers.free_port()
        self.conf = os.path.join(self.dir, 'ironic.conf')
        auth = 'auth_strategy = noauth'
        if self.credentials is not None:
            auth = (
                'auth_strategy = http_basic\nhttp_basic_auth_user_file = %s'
                % self._write_users(*self.credentials)
            )
        authtoken = ''
        if self.keystone is not None:
            auth = 'auth_strategy = keystone'
            authtoken = self.keystone.authtoken_conf()
        with open(self.conf, 'w') as handle:
            handle.write(
                _COMMON.format(
                    state=os.path.join(self.dir, 'state'),
                    auth=auth,
                    api_port=self.api_port,
                    database=self.database_url,
                    backend=self.redis.url,
                    manager=self.manager,
                    hook=(
                        'hash_ring_manager = affinity'
                        if IRONIC_HOOK and not self.plain
                        else ''
                    ),
                    middleware=(
                        'middleware = affinity'
                        if self.api == 'middleware'
                        else ''
                    ),
                    **self.timers,
                )
                + authtoken
                + self.extra_conf
            )
        self.processes: dict[str, subprocess.Popen[bytes]] = {}
        self.addCleanup(self.stop_all)
        self.start_api(self.build)

    def start_api(self, build: previous_build.Build | None = None) -> None:
        """Start the API and wait until it answers.

        :param build: what it runs (previous_build); None for the
            test's own.
        """
        self._start(
            'api',
            API_MODES[self.api]
            + ['--config-file', self.conf]
            + self._proxied('api'),
            build,
        )
        self.wait(lambda: self._get('/v1') is not None, 60, 'API up')

    def _drop_database(self, admin: sa.Engine) -> None:
        with admin.connect() as connection:
            connection.execute(
                sa.text(
                    'DROP DATABASE IF EXISTS %s WITH (FORCE)' % self.dbname
                )
            )
        admin.dispose()

    # Processes

    def _start(
        self,
        name: str,
        command: list[str],
        build: previous_build.Build | None = None,
    ) -> None:
        build = build or previous_build.CURRENT
        log = open(os.path.join(self.dir, name + '.log'), 'ab')
        self.processes[name] = subprocess.Popen(
            build.command(command),
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            env=build.environment(),
        )
        log.close()

    def dbsync(
        self, *args: str, build: previous_build.Build | None = None
    ) -> subprocess.CompletedProcess[str]:
        """Run ironic-dbsync on this deployment's database (the test's
        own Ironic unless ``build`` says another); raise if it fails."""
        command = [_bin('ironic-dbsync'), '--config-file', self.conf, *args]
        return servers.run(
            (build or previous_build.CURRENT).command(command), timeout=300
        )

    def stop(self, name: str, keep_registered: bool = False) -> float:
        """Stop a process as its service manager does (SIGTERM), and
        wait for it; the seconds it took.

        :param keep_registered: send SIGUSR1 first, Ironic's signal not
            to deregister a conductor that is restarted.
        """
        process = self.processes[name]
        started = time.monotonic()
        if keep_registered:
            os.kill(process.pid, signal.SIGUSR1)
            time.sleep(0.5)  # Ironic sets a flag in its handler
        process.terminate()
        process.wait(90)
        return time.monotonic() - started

    def _proxied(self, name: str) -> list[str]:
        """The process's own proxies, as options for its command line:
        none unless the deployment is cuttable."""
        if not self.cuttable:
            return []
        if name not in self.proxies:
            database = sa.engine.make_url(self.database_url)
            self.proxies[name] = {
                'redis': cut_proxy.CutProxy('127.0.0.1', self.redis.port),
                'database': cut_proxy.CutProxy(
                    database.host or '127.0.0.1', database.port or 5432
                ),
            }
            for proxy in self.proxies[name].values():
                self.addCleanup(proxy.stop)
        proxies = self.proxies[name]
        database = sa.engine.make_url(self.database_url).set(
            host='127.0.0.1', port=proxies['database'].port
        )
        path = os.path.join(self.dir, name + '.proxies.conf')
        with open(path, 'w') as handle:
            handle.write(
                '[affinity]\nbackend_url = redis://127.0.0.1:%d\n'
                '[database]\nconnection = %s\n'
                % (
                    proxies['redis'].port,
                    database.render_as_string(hide_password=False),
                )
            )
        return ['--config-file', path]

    def cut(self, name: str, server: str, mode: str) -> None:
        """Cut process ``name`` (api, conductor1...) off ``server``
        ('redis' or 'database'): ``refuse`` or ``blackhole``."""
        self.proxies[name][server].cut(mode)

    def heal(self, name: str, server: str) -> None:
        self.proxies[name][server].heal()

    def conductor_name(self, index: int) -> str:
        return '127.0.0.1:%d' % (self.first_rpc_port + index - 1)

    def write_tags(
        self, index: int, conductor_group: str = '', **tag_lists: str
    ) -> str:
        path = os.path.join(self.dir, 'conductor%d.conf' % index)
        lines = [
            '[DEFAULT]',
            'host = 127.0.0.1',
            '[json_rpc]',
            'port = %d' % (self.first_rpc_port + index - 1),
            '[conductor]',
            'conductor_group = %s' % conductor_group,
            '[affinity]',
        ] + ['%s = %s' % item for item in sorted(tag_lists.items())]
        with open(path, 'w') as handle:
            handle.write('\n'.join(lines) + '\n')
        return path

    def start_conductor(
        self,
        index: int,
        program: str | None = None,
        build: previous_build.Build | None = None,
        **tag_lists: str,
    ) -> None:
        """:param program: the command; by default the launcher, or
        Ironic's own ironic-conductor for the baseline (see __init__)
        and where ironic.conf enables the plugin (IRONIC_HOOK).
        :param build: what it runs (previous_build); None for the
            test's own."""
        path = self.write_tags(index, **tag_lists)
        name = 'conductor%d' % index
        if program is None:
            program = (
                'ironic-conductor'
                if self.plain or IRONIC_HOOK
                else 'ironic-affinity-conductor'
            )
        self._start(
            name,
            [_bin(program), '--config-file', self.conf]
            + self._proxied(name)
            + ['--config-file', path],
            build,
        )

    def wait_conductors(self, *indexes: int, timeout: float = 60) -> None:
        """Wait until Ironic's rings would list the conductors.

        Not ``alive`` in ``GET /v1/conductors``: Ironic shows a
        conductor alive, with its drivers, as soon as it registers, and
        lists it for its hardware types (what every ring, Ironic's own
        too, is built from) only once it has registered its interfaces
        a moment later. A node request in between gets Ironic's own
        "no conductor supports driver", whatever the ring.
        """
        wanted = {self.conductor_name(i) for i in indexes}
        database = ironic_db.IronicDatabase(self.database_url)

        def active() -> bool:
            try:
                found = database.active_conductors(
                    self.timers['heartbeat_timeout']
                )
            except sa.exc.SQLAlchemyError:
                return False
            return wanted <= set().union(*found.values())

        try:
            self.wait(active, timeout, 'conductors %s active' % sorted(wanted))
        finally:
            database.dispose()

    def pids(self, name: str) -> list[int]:
        """The parent and its forked worker(s)."""
        parent = self.processes[name].pid
        children = subprocess.run(
            ['pgrep', '-P', str(parent)],
            capture_output=True,
            text=True,
            check=False,
        ).stdout.split()
        return [parent] + [int(c) for c in children]

    def crash(self, index: int) -> None:
        """SIGKILL the conductor's worker and parent together: a crash,
        not the clean shutdown killing the parent alone causes.

        Every process is stopped before any is killed: a worker whose
        parent dies first deregisters itself (online false) if it runs
        even briefly before its own SIGKILL, which on a loaded machine it
        did, between two kill calls.
        """
        name = 'conductor%d' % index
        pids = self.pids(name)
        for pid in pids:
            os.kill(pid, signal.SIGSTOP)
        orphans_cpu[0] += cpu_seconds(pids[1:])
        for pid in pids:
            os.kill(pid, signal.SIGKILL)
        self.processes[name].wait(10)

    def reload(
        self, index: int, keep_registered: bool = False, **tag_lists: str
    ) -> None:
        """Edit the conductor's tags and send it SIGHUP.

        :param keep_registered: send SIGUSR1 first, Ironic's signal not
            to deregister the conductor when it restarts its worker.
        """
        self.write_tags(index, **tag_lists)
        pid = self.processes['conductor%d' % index].pid
        if keep_registered:
            os.kill(pid, signal.SIGUSR1)
            # Ironic sets a flag in its handler; let it run first.
            time.sleep(0.5)
        os.kill(pid, signal.SIGHUP)

    def stop_all(self) -> None:
        for process in self.processes.values():
            if process.poll() is None:
                orphans_cpu[0] += cpu_seconds(
                    _group(process.pid) - {process.pid}
                )
                try:
                    os.killpg(process.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                process.wait(15)

    # The REST API

    def _write_users(self, user: str, password: str) -> str:
        """An htpasswd file, bcrypt as Ironic's http_basic requires."""
        import bcrypt  # installed with Ironic's API

        path = os.path.join(self.dir, 'users')
        hashed = bcrypt.hashpw(password.encode(), bcrypt.gensalt(4))
        with open(path, 'w') as handle:
            handle.write('%s:%s\n' % (user, hashed.decode()))
        return path

    def _request(
        self,
        method: str,
        path: str,
        body: object = None,
        credentials: tuple[str, str] | str | None | bool = True,
    ) -> tuple[int, dict]:
        """:param credentials: True for the deployment's own (Keystone's
        admin, with the keystone strategy), None for an anonymous
        request, (user, password) for http_basic, or a Keystone token."""
        data = None if body is None else json.dumps(body).encode()
        headers = dict(API_VERSION, **{'Content-Type': 'application/json'})
        if credentials is True:
            credentials = (
                self.credentials
                if self.keystone is None
                else self.keystone.admin_token
            )
        if isinstance(credentials, str):
            headers['X-Auth-Token'] = credentials
        elif isinstance(credentials, tuple):
            token = base64.b64encode(('%s:%s' % credentials).encode())
            headers['Authorization'] = 'Basic ' + token.decode()
        request = urllib.request.Request(
            'http://127.0.0.1:%d%s' % (self.api_port, path),
            data=data,
            method=method,
            headers=headers,
        )
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                text = response.read()
                return response.status, json.loads(text) if text else {}
        except urllib.error.HTTPError as exc:
            text = exc.read()
            try:
                return exc.code, json.loads(text)
            except ValueError:
                return exc.code, {'raw': text.decode(errors='replace')}

    def get(self, path: str) -> dict | None:
        """The body of a GET answered 200, or None."""
        return self._get(path)

    def _get(self, path: str) -> dict | None:
        try:
            status, body = self._request('GET', path)
        except OSError:
            return None
        return body if status == 200 else None

    def post_node(
        self,
        name: str,
        tags: object,
        conductor_group: str = '',
        owner: str = '',
    ) -> tuple[int, dict]:
        body: dict[str, object] = {
            'name': name,
            'driver': 'fake-hardware',
            'extra': {'affinity_tags': tags},
        }
        if conductor_group:
            body['conductor_group'] = conductor_group
        if owner:
            body['owner'] = owner
        return self._request('POST', '/v1/nodes', body)

    def create_node(self, name: str, tags: str, owner: str = '') -> str:
        """:param owner: the node's owner (a Keystone project id): that
        project's readers may see the node under Ironic's policy."""
        status, body = self.post_node(name, tags, owner=owner)
        assert status == 201, (status, body)
        return str(body['uuid'])

    def conductor_of(self, node: str) -> str | None:
        body = self._get('/v1/nodes/%s' % node)
        assert body is not None, node
        return body.get('conductor')

    def patch_node(
        self, node: str, extra_key: str, value: object
    ) -> tuple[int, dict]:
        return self._request(
            'PATCH',
            '/v1/nodes/%s' % node,
            [{'op': 'add', 'path': '/extra/%s' % extra_key, 'value': value}],
        )

    def make_active(self, node: str, timeout: float = 60) -> None:
        """Deploy the node (fake interfaces: no hardware), so that
        Ironic's takeover of active nodes runs on it."""
        for target, state in (
            ('manage', 'manageable'),
            ('provide', 'available'),
            ('active', 'active'),
        ):
            status, body = self._request(
                'PUT',
                '/v1/nodes/%s/states/provision' % node,
                {'target': target},
            )
            assert status == 202, (target, status, body)
            self.wait(
                functools.partial(self._in_state, node, state),
                timeout,
                'node %s %s' % (node, state),
            )

    def _in_state(self, node: str, state: str) -> bool:
        found = self._get('/v1/nodes/%s' % node) or {}
        return found.get('provision_state') == state

    def cli(self, *args: str) -> subprocess.CompletedProcess[str]:
        """Run the ironic-affinity operator command on this deployment."""
        return subprocess.run(
            [_bin('ironic-affinity'), '--config-file', self.conf, *args],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )

    def members(self) -> list[str] | None:
        """The names ``ironic-affinity members`` lists, sorted; None when
        it fails (the backend unreachable). One run costs about a CPU
        second: poll it every CLI_POLL."""
        result = self.cli('members', '-f', 'json')
        if result.returncode != 0:
            return None
        return sorted(m['name'] for m in json.loads(result.stdout)['members'])

    def wait_members(self, *indexes: int, timeout: float = 30) -> None:
        """Wait until ``ironic-affinity members`` lists the conductors.

        Not needed before requests (a conductor joins the group before
        Ironic lists it); for tests of the command's own view.
        """
        wanted = {self.conductor_name(i) for i in indexes}
        self.wait(
            lambda: wanted <= set(self.members() or ()),
            timeout,
            'conductors %s in the group' % wanted,
            interval=CLI_POLL,
        )

    def status(self, *options: str) -> subprocess.CompletedProcess[str]:
        """ironic-affinity-status upgrade check on this deployment."""
        return subprocess.run(
            [
                _bin('ironic-affinity-status'),
                '--config-file',
                self.conf,
                'upgrade',
                'check',
                *options,
            ],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )

    def log(self, name: str) -> str:
        with open(os.path.join(self.dir, name + '.log'), 'rb') as handle:
            return handle.read().decode(errors='replace')

    # Evidence from the conductors' own work

    def log_offsets(self) -> dict[str, int]:
        return {
            name: os.path.getsize(os.path.join(self.dir, name + '.log'))
            for name in self.processes
            if name.startswith('conductor')
        }

    def log_since(self, name: str, start: int, end: int) -> str:
        """The process's log between two offsets."""
        with open(os.path.join(self.dir, name + '.log'), 'rb') as log:
            log.seek(start)
            return log.read(max(0, end - start)).decode(errors='replace')

    def power_synced_since(
        self, offsets: dict[str, int]
    ) -> dict[str, set[str]]:
        """node uuid -> conductors that ran its power sync since then."""
        found: dict[str, set[str]] = {}
        for name, offset in offsets.items():
            index = int(name[len('conductor') :])
            with open(os.path.join(self.dir, name + '.log'), 'rb') as log:
                log.seek(offset)
                text = log.read().decode(errors='replace')
            for node in _POWER_SYNC.findall(text):
                found.setdefault(node, set()).add(self.conductor_name(index))
        return found

    def _timed_power_sync_lines(
        self, offsets: dict[str, int]
    ) -> typing.Iterator[tuple[str, float, str, str, str]]:
        """(conductor name, when, node, "Completed" or "", runtime) of
        each power sync line since then, by the logs' clock (this host's
        local time): a node's sync has a node and no "Completed"; a
        pass's end has "Completed", and its runtime on Ironic 32 and
        later."""
        for name, offset in offsets.items():
            conductor = self.conductor_name(int(name[len('conductor') :]))
            with open(os.path.join(self.dir, name + '.log'), 'rb') as log:
                log.seek(offset)
                text = log.read().decode(errors='replace')
            for stamp, node, completed, runtime in _TIMED_POWER_SYNC.findall(
                text
            ):
                at = datetime.datetime.strptime(
                    stamp, '%Y-%m-%d %H:%M:%S.%f'
                ).timestamp()
                yield conductor, at, node, completed, runtime

    def power_syncs_logged(
        self, offsets: dict[str, int]
    ) -> list[tuple[float, str, str]]:
        """(when, node uuid, conductor name) of each power sync since
        then, by the logs' clock (seconds since the epoch)."""
        return [
            (at, node, conductor)
            for conductor, at, node, completed, _ in (
                self._timed_power_sync_lines(offsets)
            )
            if not completed
        ]

    def power_sync_passes(
        self, offsets: dict[str, int]
    ) -> dict[str, list[tuple[float, float, frozenset[str]]]]:
        """conductor name -> (start, end, node uuids) of each power sync
        pass since then, in order, by the logs' clock (this host's local
        time).

        A conductor lists the nodes it holds by the ring as a pass
        begins and syncs them one by one after, so the start is when it
        took those nodes for its own. Ironic 32 and later log each pass's
        runtime as it ends; Ironic 29 does not, and its pass is taken to
        begin at its first sync (its listing is just before it). A pass
        still running as the log is read (or cut by a stop) ends at its
        last sync.
        """
        found: dict[str, list[tuple[float, float, frozenset[str]]]] = {
            self.conductor_name(int(name[len('conductor') :])): []
            for name in offsets
        }
        # The syncs of each conductor's pass under way.
        synced: dict[str, list[tuple[float, str]]] = {c: [] for c in found}
        for (
            conductor,
            at,
            node,
            completed,
            runtime,
        ) in self._timed_power_sync_lines(offsets):
            running = synced[conductor]
            if not completed:
                running.append((at, node))
                continue
            if running:
                began = running[0][0]
                if runtime:
                    began = min(began, at - float(runtime))
                found[conductor].append(
                    (began, at, frozenset(n for _, n in running))
                )
            synced[conductor] = []
        for conductor, running in synced.items():
            if running:
                found[conductor].append(
                    (
                        running[0][0],
                        running[-1][0],
                        frozenset(n for _, n in running),
                    )
                )
        return found

    @staticmethod
    def wait(predicate, timeout: float, what, interval: float = 0.2) -> float:  # type: ignore[no-untyped-def]
        """Wait until predicate() holds; the seconds it took.

        :param what: what is waited for, or a callable that says it at
            the time-out (with what was last seen).
        :param interval: seconds between two tries. CLI_POLL for a
            predicate that runs the ironic-affinity command: each run
            is a process of its own, about 1 CPU second.
        """
        start = time.monotonic()
        while time.monotonic() - start < timeout:
            if predicate():
                return time.monotonic() - start
            time.sleep(interval)
        raise AssertionError(
            'timed out after %ss waiting for %s'
            % (timeout, what() if callable(what) else what)
        )
