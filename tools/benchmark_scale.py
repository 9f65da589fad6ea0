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

"""Scale: what an idle deployment costs, and how fast it fails over.

Runs a real Ironic (one API and --conductors conductors, on a scratch
PostgreSQL database and a Redis of their own, Ironic's default heartbeat
and ring timers, a power sync every 60 s) over --nodes nodes, once per
ring of --managers (the affinity ring, then Ironic's stock ring, by
default), one after the other on this machine, and prints both side by
side:

* idle, over a --window seconds long enough to hold power syncs: rows of
  the ``nodes`` table read per second and its scans, from
  ``pg_stat_user_tables`` (so every reader counts: Ironic's own periodic
  tasks as well as the node tag caches); PostgreSQL's CPU; operations per
  second on the coordination backend, the benchmark's own INFO calls
  left out; CPU, memory and threads of the API and of each conductor
  (parent and worker together); the whole machine's CPU;
* restarts: conductor 2 restarted as a rolling upgrade restarts it
  (SIGUSR1, SIGTERM, started again), then the API: the seconds until
  each serves again, and how many of the conductor's nodes moved;
* failover: conductor 1 killed (worker and parent, SIGKILL), and the
  seconds until the API shows a sample of its nodes, then all of them,
  on another conductor.

The nodes are not created through the REST API, which would take hours
at 100,000: one node is (so that its row is Ironic's own), and its row is
copied in SQL, with a new id, uuid, name and affinity tags and the time
of the copy as ``created_at``, before any conductor runs, so that no
start-up is measured. The window opens once every conductor routes and
has run its first power sync (an idle conductor's first ring lookup, so
every tag cache is running), and --settle seconds more.

Needs Ironic, psycopg2, redis (the Python client), PostgreSQL and
redis-server; tox -e e2e installs the Python side::

    .tox/e2e/bin/python tools/benchmark_scale.py --conductors 8 \\
        --nodes 20000 [--window 180] [--own-postgres] [--json FILE]

The database is on the machine's PostgreSQL (IRONIC_AFFINITY_E2E_POSTGRES,
as for the end-to-end tests) while it has connections enough: about
10 a conductor and 20 more (8 conductors used 74: scale.rst), which
the shared server, at max_connections 100, has not for 30. Then, or with
--own-postgres, the run has a PostgreSQL cluster of its own
(scratch_postgres.py: initdb in a temporary folder, max_connections 500,
the shared server's version and settings otherwise), removed at the end.

Conductors listen from --first-rpc-port (8391 by default, clear of the
end-to-end tests', the load test's and the soak's ports); each further
ring takes the next block of ports. Every process is stopped and the
database dropped at the end of each run. Nothing else should run on the
machine meanwhile: the "rest of the machine" and "other Ironic processes"
rows show what did. PostgreSQL's CPU is given twice: every process of the
server the database is on (the postmaster and its children: the shared
server's serve other databases too; those of other servers on the
machine are not counted), and the backends of this deployment's
database alone. The setup lines say which server that was.

The affinity ring needs three conductors or more: load.CONDUCTOR_TAGS has
each node refused by one conductor of three, so that from three on the
crash orphans no node.
"""

import argparse
from collections.abc import Iterator
import contextlib
import dataclasses
import datetime
import importlib.metadata
import json
import os
import platform
import random
import re
import signal
import statistics
import subprocess
import sys
import threading
import time
from typing import Any

import redis
import scratch_postgres
import sqlalchemy as sa

import ironic_affinity
from ironic_affinity.tests.e2e import deployment
from ironic_affinity.tests.e2e import load

FIRST_RPC_PORT = 8391
# Where the nodes keep their tags: Deployment.post_node's key, and the
# default of [affinity]node_tag_key.
TAG_KEY = 'affinity_tags'
NAME = 'scale-%06d'
# The columns a copy of a node's row sets itself (see copy_node).
COPY_SETS = ('id', 'uuid', 'name', 'extra', 'created_at')
CLOCK_TICK = os.sysconf('SC_CLK_TCK')
NODE_COUNTERS = ('seq_scan', 'seq_tup_read', 'idx_scan', 'idx_tup_fetch')
# PostgreSQL connections a run takes at most, estimated: each conductor's
# processes keep pools (8 conductors used 73 connections in all), and the
# API, the harness and this benchmark take a few.
CONNECTIONS_PER_CONDUCTOR = 10
CONNECTIONS_BESIDES = 20
# max_connections of a cluster of the run's own.
OWN_MAX_CONNECTIONS = 500


# The machine and the software


def _machine(url: str) -> dict[str, Any]:
    with open('/proc/meminfo') as handle:
        total_kib = int(handle.readline().split()[1])
    model = ''
    with open('/proc/cpuinfo') as handle:
        for line in handle:
            if line.startswith('model name'):
                model = line.split(':', 1)[1].strip()
                break
    return {
        'cores': os.cpu_count() or 0,
        'cpu': model,
        'memory_gib': round(total_kib / 1024**2, 1),
        'python': platform.python_version(),
        'ironic': importlib.metadata.version('ironic'),
        'postgres': _postgres_setting(url, 'server_version').split()[0],
        'postgres_max_connections': int(
            _postgres_setting(url, 'max_connections')
        ),
        'redis': _redis_version(),
        # The tree the processes import: the plugin, and this harness.
        'plugin': os.path.dirname(ironic_affinity.__file__),
    }


def _postgres_setting(url: str, name: str) -> str:
    return str(_postgres_query(url, 'SHOW ' + name)[0][0])


def _postgres_query(url: str, query: str) -> list[tuple[Any, ...]]:
    """The rows of one query on the server's ``postgres`` database."""
    engine = sa.create_engine(url + '/postgres', poolclass=sa.pool.NullPool)
    try:
        with engine.connect() as connection:
            return [tuple(row) for row in connection.execute(sa.text(query))]
    finally:
        engine.dispose()


def _configured(url: str) -> dict[str, str]:
    """The server's settings not at PostgreSQL's defaults, for the
    record: a shared server's may be tuned (autovacuum off, say)."""
    rows = _postgres_query(
        url,
        'SELECT name, current_setting(name) FROM pg_settings '
        "WHERE source NOT IN ('default', 'override', 'client') "
        'ORDER BY name',
    )
    return {str(name): str(value) for name, value in rows}


def _redis_version() -> str:
    text = subprocess.run(
        ['redis-server', '--version'],
        capture_output=True,
        text=True,
        check=False,
    ).stdout
    found = re.search(r'v=(\S+)', text)
    return found.group(1) if found else text.strip()


# Reading /proc


def _stat(pid: int) -> list[str]:
    """The fields of /proc/PID/stat after the command name, from the
    state (field 3) on; empty when the process is gone."""
    try:
        with open('/proc/%d/stat' % pid) as handle:
            return handle.read().rpartition(')')[2].split()
    except (FileNotFoundError, ProcessLookupError):
        return []


def _postgres(postmaster: int) -> dict[int, tuple[str, list[str]]]:
    """pid -> (process title, stat fields) of one PostgreSQL server's
    processes: its postmaster and every process it started.

    The machine may run several servers (the shared one, a cluster of
    this run's own, the fault tests'), and only the one the database is
    on is measured.
    """
    found = {}
    for entry in os.listdir('/proc'):
        if not entry.isdigit():
            continue
        pid = int(entry)
        fields = _stat(pid)
        # The parent: field 4 of the whole line.
        if not fields or postmaster not in (pid, int(fields[1])):
            continue
        try:
            with open('/proc/%d/cmdline' % pid, 'rb') as handle:
                title = handle.read().decode(errors='replace')
        except (FileNotFoundError, ProcessLookupError):
            continue
        found[pid] = (title, fields)
    return found


def _cpu(fields: list[str]) -> float:
    """utime + stime of /proc/PID/stat's fields (see _stat), seconds."""
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICK


class BackendCPU(threading.Thread):
    """CPU seconds of one database's backends over a window.

    The server may be shared (other deployments, the end-to-end tests),
    so this counts only those of its processes (see _postgres) whose
    title names the database, looking every ``every`` seconds: Ironic's
    pools open and close connections beyond their size during every
    power sync, and a backend gone between two looks loses only its last
    moments.
    """

    def __init__(
        self, database: str, postmaster: int, every: float = 1.0
    ) -> None:
        super().__init__(name='backend-cpu', daemon=True)
        self.database = ' %s ' % database
        self.postmaster = postmaster
        self.every = every
        self.done = threading.Event()
        self.start_cpu = self._look()
        self.last = dict(self.start_cpu)

    def _look(self) -> dict[int, float]:
        return {
            pid: _cpu(fields)
            for pid, (title, fields) in _postgres(self.postmaster).items()
            if self.database in title
        }

    def run(self) -> None:
        while not self.done.wait(self.every):
            self.last.update(self._look())

    def stop(self) -> dict[str, float]:
        self.done.set()
        self.join()
        alive = self._look()
        self.last.update(alive)
        return {
            # A backend born in the window counts whole.
            'cpu_seconds': sum(
                cpu - self.start_cpu.get(pid, 0.0)
                for pid, cpu in self.last.items()
            ),
            'at_end': len(alive),
            'opened': len(set(self.last) - set(self.start_cpu)),
            'closed': len(set(self.last) - set(alive)),
        }


def _postgres_cpu(postmaster: int) -> float:
    """CPU seconds one PostgreSQL server (see _postgres) has used so far.

    The live processes' own time plus the postmaster's reaped children's
    (cutime, cstime): a backend that ends inside the window, such as one
    of this benchmark's own connections, still counts.
    """
    ticks = 0
    for pid, (_, fields) in _postgres(postmaster).items():
        # utime, stime; and for the postmaster cutime and cstime too.
        ticks += int(fields[11]) + int(fields[12])
        if pid == postmaster:
            ticks += int(fields[13]) + int(fields[14])
    return ticks / CLOCK_TICK


def _foreign_ironic(ours: set[int]) -> int:
    """How many Ironic processes (by command line) run on this machine
    that are not ``ours``: another deployment's, whose load skews the
    figures of this one."""
    found = 0
    for entry in os.listdir('/proc'):
        if not entry.isdigit() or int(entry) in ours:
            continue
        try:
            with open('/proc/%s/comm' % entry) as handle:
                # PostgreSQL's backends name their database.
                if handle.read().strip() == 'postgres':
                    continue
            with open('/proc/%s/cmdline' % entry, 'rb') as handle:
                if b'ironic' in handle.read():
                    found += 1
        except (FileNotFoundError, ProcessLookupError):
            continue
    return found


def _machine_cpu() -> tuple[float, float]:
    """(busy, all) CPU seconds of the machine so far, over every core."""
    with open('/proc/stat') as handle:
        values = [int(v) for v in handle.readline().split()[1:9]]
    idle = values[3] + values[4]
    return (sum(values) - idle) / CLOCK_TICK, sum(values) / CLOCK_TICK


def _memory(pids: list[int]) -> dict[str, float]:
    """RSS and PSS in MiB, and threads, summed over the processes.

    RSS counts the pages a forked worker shares with its parent twice,
    as ``ps`` would; PSS divides them among the sharers.
    """
    rss = pss = threads = 0
    for pid in pids:
        try:
            with open('/proc/%d/status' % pid) as handle:
                for line in handle:
                    if line.startswith('VmRSS:'):
                        rss += int(line.split()[1])
                    elif line.startswith('Threads:'):
                        threads += int(line.split()[1])
            with open('/proc/%d/smaps_rollup' % pid) as handle:
                for line in handle:
                    if line.startswith('Pss:'):
                        pss += int(line.split()[1])
        except (FileNotFoundError, ProcessLookupError):
            continue
    return {
        'rss_mib': round(rss / 1024, 1),
        'pss_mib': round(pss / 1024, 1),
        'threads': threads,
    }


# The PostgreSQL server


@dataclasses.dataclass(frozen=True)
class Server:
    """The PostgreSQL server a run's databases are on."""

    #: SQLAlchemy base URL, without a database.
    url: str
    #: Whether it is the run's own cluster, or the shared server.
    own: bool
    #: Its postmaster's pid: whose processes are measured (_postgres).
    postmaster: int

    def describe(self) -> str:
        """Which server, for the setup lines (its settings are in the
        JSON setup)."""
        address = sa.engine.make_url(self.url)
        return '%s at %s:%d, postmaster pid %d' % (
            "this run's own cluster" if self.own else 'the shared server',
            address.host,
            address.port or 5432,
            self.postmaster,
        )


def _postmaster(url: str) -> int:
    """The pid of the postmaster of the server at ``url``: the parent of
    the backend serving a connection of ours, read while it does."""
    engine = sa.create_engine(url + '/postgres', poolclass=sa.pool.NullPool)
    try:
        with engine.connect() as connection:
            backend = connection.execute(
                sa.text('SELECT pg_backend_pid()')
            ).scalar_one()
            fields = _stat(backend)
    finally:
        engine.dispose()
    if not fields:
        raise SystemExit(
            'PostgreSQL at %s is not on this machine (its backend %d is no '
            'process here): its CPU cannot be measured' % (url, backend)
        )
    return int(fields[1])


def _shared_shortfall(needed: int) -> str | None:
    """Why the shared server cannot take a run of ``needed``
    connections, or None when it can.

    What it has free, not its max_connections alone: another deployment
    (the end-to-end tests, another benchmark) may hold some. Every
    connection here is a superuser's, which may take the reserved ones.
    """
    try:
        [(most, used)] = _postgres_query(
            deployment.POSTGRES,
            "SELECT current_setting('max_connections')::int, count(*) "
            'FROM pg_stat_activity '
            "WHERE backend_type = 'client backend' "
            'AND pid <> pg_backend_pid()',
        )
    except sa.exc.OperationalError as exc:
        return 'the shared PostgreSQL does not answer (%s)' % ' '.join(
            str(exc.orig).split()
        )
    if most - used >= needed:
        return None
    return (
        'the shared PostgreSQL has %d connections free (max_connections '
        '%d, %d in use) and the run needs about %d'
        % (most - used, most, used, needed)
    )


@contextlib.contextmanager
def postgres_server(args: argparse.Namespace) -> Iterator[Server]:
    """The shared server, or a cluster of the run's own when asked
    (--own-postgres) or when the shared one has too few connections;
    the cluster is removed when the ``with`` ends, however it ends."""
    if not args.own_postgres:
        why = _shared_shortfall(
            CONNECTIONS_PER_CONDUCTOR * args.conductors + CONNECTIONS_BESIDES
        )
        if why is None:
            url = deployment.POSTGRES
            yield Server(url, own=False, postmaster=_postmaster(url))
            return
        _say('%s: starting a PostgreSQL cluster of its own' % why)
    try:
        template = scratch_postgres.template_of(deployment.POSTGRES)
    except sa.exc.OperationalError:
        # No shared server to copy: PostgreSQL's defaults then.
        template = scratch_postgres.Template()
        _say('no shared PostgreSQL to copy: its own runs on the defaults')
    with scratch_postgres.ScratchPostgres(
        template, OWN_MAX_CONNECTIONS
    ) as cluster:
        _say('own PostgreSQL at %s, in %s' % (cluster.url, cluster.dir))
        yield Server(cluster.url, own=True, postmaster=cluster.pid)


# The nodes


def bootstrap_node(dep: load.LoadDeployment) -> str:
    """Create node 0 through the API; its uuid.

    Ironic creates nodes on a conductor (the API's POST calls it over
    RPC), so conductor 1 runs for that one request and is then stopped
    cleanly (it deregisters), to come back with the others once every
    row is in.
    """
    dep.start_all(1)
    node = dep.create_node(NAME % 0, load.node_tags(0))
    stop_cleanly(dep, 'conductor1')
    return node


def stop_cleanly(dep: deployment.Deployment, name: str) -> None:
    """SIGTERM the parent, which stops its workers, and wait for all."""
    pids = dep.pids(name)
    os.kill(pids[0], signal.SIGTERM)
    dep.processes[name].wait(120)
    dep.wait(lambda: not any(_stat(p) for p in pids[1:]), 30, name + ' gone')


def copy_node(database_url: str, node: str, count: int) -> None:
    """Make ``count`` nodes in all out of ``node``'s row, in one INSERT.

    Every column is the original's but the id (the sequence's next), the
    uuid, the name, ``extra`` (the original's, with load.node_tags(i) as
    the tags of node i) and ``created_at`` (now, as for a node just
    created: what every reader's change detection looks at). VACUUM
    ANALYZE then leaves the table settled, so that no autovacuum of the
    fresh rows lands in the window.
    """
    engine = sa.create_engine(database_url)
    try:
        kept = [
            '"%s"' % column['name']
            for column in sa.inspect(engine).get_columns('nodes')
            if column['name'] not in COPY_SETS
        ]
        insert = sa.text(
            'INSERT INTO nodes (uuid, name, extra, created_at, %s) '
            'SELECT gen_random_uuid()::text, copy.name, copy.extra, '
            "now() AT TIME ZONE 'utc', %s "
            'FROM nodes AS original, unnest(CAST(:names AS text[]), '
            'CAST(:extras AS text[])) AS copy(name, extra) '
            'WHERE original.uuid = :uuid'
            % (', '.join(kept), ', '.join('original.' + c for c in kept))
        )
        with engine.begin() as connection:
            extra = connection.execute(
                sa.text('SELECT extra FROM nodes WHERE uuid = :uuid'),
                {'uuid': node},
            ).scalar_one()
            base = json.loads(extra or '{}')
            connection.execute(
                insert,
                {
                    'uuid': node,
                    'names': [NAME % i for i in range(1, count)],
                    'extras': [
                        json.dumps(dict(base, **{TAG_KEY: load.node_tags(i)}))
                        for i in range(1, count)
                    ],
                },
            )
        with engine.connect().execution_options(
            isolation_level='AUTOCOMMIT'
        ) as connection:
            connection.execute(sa.text('VACUUM (ANALYZE) nodes'))
    finally:
        engine.dispose()


# The deployment


class ScaleDeployment(load.LoadDeployment):
    """A LoadDeployment on ``server``, whose start waits as long as many
    conductors take.

    LoadDeployment.start_all waits 120 s for the conductors to register:
    enough for a few, not for 30 starting at once on two cores. The
    server is set here, not through deployment.POSTGRES or its
    environment variable: Deployment's default is read when it is
    imported, and LoadDeployment does not pass one on.
    """

    def __init__(self, server: Server, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.server = server
        self.postgres = server.url

    def wait_conductors(self, *indexes: int, timeout: float = 60) -> None:
        super().wait_conductors(
            *indexes, timeout=max(timeout, 60 + 6 * len(indexes))
        )


def log_sizes(dep: deployment.Deployment, count: int) -> dict[str, int]:
    """conductorN -> the size of its log now (0 when it has none yet)."""
    sizes = {}
    for index in range(1, count + 1):
        path = os.path.join(dep.dir, 'conductor%d.log' % index)
        sizes['conductor%d' % index] = (
            os.path.getsize(path) if os.path.exists(path) else 0
        )
    return sizes


def wait_first_syncs(
    dep: deployment.Deployment,
    offsets: dict[str, int],
    timeout: float,
) -> float | None:
    """Seconds until every conductor has begun a power sync since
    ``offsets``, or None after ``timeout``.

    On an idle conductor the power sync makes the first ring lookup, which
    is what starts the plugin's node tag cache: until then a conductor
    does not yet do its steady work.
    """
    wanted = {
        dep.conductor_name(int(name[len('conductor') :])) for name in offsets
    }
    start = time.monotonic()
    while time.monotonic() - start < timeout:
        synced = dep.power_synced_since(offsets).values()
        if wanted <= set().union(*synced):
            return time.monotonic() - start
        # The logs grow by thousands of lines a sync: no need to hurry.
        time.sleep(2)
    return None


# Idle measurement


@dataclasses.dataclass(frozen=True)
class Snapshot:
    """Cumulative counters at one moment; figures are their deltas."""

    at: float
    # pg_stat_user_tables of the nodes table, by NODE_COUNTERS.
    nodes: dict[str, int]
    # CPU seconds of every process of the server (see _postgres).
    postgres_cpu: float
    # Ironic processes on the machine not of this deployment.
    foreign: int
    # Redis command name -> calls so far.
    redis_calls: dict[str, int]
    redis_cpu: float
    # Service (api, conductorN) -> CPU seconds of its processes.
    cpu: dict[str, float]
    # (busy, all) CPU seconds of the machine.
    machine: tuple[float, float]


class Probe:
    """Reads the counters of one deployment without adding to them.

    Each snapshot asks PostgreSQL on a fresh connection (a connection
    keeps the statistics it read first until its transaction ends) and
    Redis for INFO commandstats on one connection opened beforehand, so
    that the only command of this probe between two snapshots is the
    first one's INFO.
    """

    def __init__(self, dep: ScaleDeployment) -> None:
        self.postmaster = dep.server.postmaster
        self.stats = sa.create_engine(
            dep.database_url, poolclass=sa.pool.NullPool
        )
        self.redis = redis.Redis(host='127.0.0.1', port=dep.redis.port)
        self.redis.ping()
        self.redis_pid = dep.redis.process.pid
        self.pids = {name: dep.pids(name) for name in dep.processes}

    def snapshot(self) -> Snapshot:
        at = time.monotonic()
        with self.stats.connect() as connection:
            row = connection.execute(
                sa.text(
                    'SELECT %s FROM pg_stat_user_tables '
                    "WHERE relname = 'nodes'"
                    % ', '.join('coalesce(%s, 0)' % c for c in NODE_COUNTERS)
                )
            ).one()
        calls = self.redis.info('commandstats')
        return Snapshot(
            at=at,
            nodes=dict(zip(NODE_COUNTERS, map(int, row), strict=True)),
            postgres_cpu=_postgres_cpu(self.postmaster),
            foreign=_foreign_ironic(
                {p for ps in self.pids.values() for p in ps}
            ),
            redis_calls={
                name[len('cmdstat_') :]: int(stats['calls'])
                for name, stats in calls.items()
            },
            redis_cpu=deployment.cpu_seconds([self.redis_pid]),
            cpu={
                name: deployment.cpu_seconds(pids)
                for name, pids in self.pids.items()
            },
            machine=_machine_cpu(),
        )

    def memory(self) -> dict[str, dict[str, float]]:
        return {name: _memory(pids) for name, pids in self.pids.items()}

    def close(self) -> None:
        self.redis.close()
        self.stats.dispose()


def _percent(seconds: float, window: float) -> float:
    """CPU seconds over a window, as % of one core."""
    return round(100 * seconds / window, 2)


def idle_figures(
    start: Snapshot,
    end: Snapshot,
    memory: dict[str, dict[str, float]],
    backends: dict[str, float],
) -> dict[str, Any]:
    window = end.at - start.at
    nodes = {
        key: round((end.nodes[key] - start.nodes[key]) / window, 2)
        for key in NODE_COUNTERS
    }
    calls = {
        name: count - start.redis_calls.get(name, 0)
        for name, count in end.redis_calls.items()
    }
    # The probe's own: the first snapshot's INFO (the second's is not
    # counted in what it returns).
    calls['info'] -= 1
    redis_ops = {
        name: round(count / window, 2)
        for name, count in sorted(calls.items(), key=lambda i: -i[1])
        if count > 0
    }
    cpu = {name: end.cpu[name] - start.cpu[name] for name in end.cpu}
    postgres = end.postgres_cpu - start.postgres_cpu
    redis_cpu = end.redis_cpu - start.redis_cpu
    busy = end.machine[0] - start.machine[0]
    conductors = sorted(
        (n for n in cpu if n.startswith('conductor')),
        key=lambda n: int(n[len('conductor') :]),
    )
    return {
        'seconds': round(window, 1),
        'nodes_rows_per_second': round(
            nodes['seq_tup_read'] + nodes['idx_tup_fetch'], 1
        ),
        'nodes_per_second': nodes,
        'postgres_connections': backends['at_end'],
        'postgres_connections_opened': backends['opened'],
        'postgres_connections_closed': backends['closed'],
        'postgres_cpu_percent': _percent(postgres, window),
        'postgres_backends_cpu_percent': _percent(
            backends['cpu_seconds'], window
        ),
        'redis_ops_per_second': round(sum(redis_ops.values()), 2),
        'redis_ops_by_command': redis_ops,
        'redis_cpu_percent': _percent(redis_cpu, window),
        'api': dict(memory['api'], cpu_percent=_percent(cpu['api'], window)),
        'conductors': {
            name: dict(memory[name], cpu_percent=_percent(cpu[name], window))
            for name in conductors
        },
        'conductors_cpu_percent': _percent(
            sum(cpu[name] for name in conductors), window
        ),
        'machine_cpu_percent': round(
            100 * busy / (end.machine[1] - start.machine[1]), 2
        ),
        # Everything else: this benchmark, PostgreSQL's shared processes
        # and whatever else ran.
        'rest_cpu_percent': _percent(
            busy - backends['cpu_seconds'] - redis_cpu - sum(cpu.values()),
            window,
        ),
        'loadavg_1min_at_end': round(os.getloadavg()[0], 2),
        'foreign_ironic_processes': max(start.foreign, end.foreign),
    }


def measure_idle(dep: ScaleDeployment, window: float) -> dict[str, Any]:
    probe = Probe(dep)
    backends = BackendCPU(dep.dbname, dep.server.postmaster)
    try:
        backends.start()
        start = probe.snapshot()
        time.sleep(window)
        end = probe.snapshot()
        return idle_figures(start, end, probe.memory(), backends.stop())
    finally:
        backends.done.set()
        probe.close()


# Restarts, one process at a time, as a rolling upgrade does them


def measure_restarts(
    dep: load.LoadDeployment, request_timeout: float
) -> dict[str, Any]:
    """Restart conductor 2 (SIGUSR1, stop, start), then the API: how
    long each takes until it serves again, and whether any of the
    conductor's nodes moved (admin/upgrade.rst)."""
    name = dep.conductor_name(2)
    client = load.Client(
        dep.api_port, timeout=request_timeout, retry_idle=True
    )
    try:
        before = load.on_conductor(client, name, dep.max_limit)
        offset = dep.log_offsets()['conductor2']
        started = time.monotonic()
        stopped = dep.stop('conductor2', keep_registered=True)
        dep.start_conductor(2, **dep.tag_lists(2))
        dep.wait(
            lambda: (
                'Successfully started conductor'
                in dep.log_since(
                    'conductor2', offset, dep.log_offsets()['conductor2']
                )
            ),
            600,
            'conductor 2 back',
            interval=1.0,
        )
        conductor = time.monotonic() - started
        after = load.on_conductor(client, name, dep.max_limit)
    finally:
        client.close()
    started = time.monotonic()
    dep.stop('api')
    dep.start_api()
    api = time.monotonic() - started
    return {
        'conductor': name,
        'its_nodes': len(before),
        'conductor_stop_seconds': round(stopped, 1),
        'conductor_restart_seconds': round(conductor, 1),
        'nodes_moved': len(before ^ after),
        'api_restart_seconds': round(api, 1),
    }


# Failover


def measure_failover(
    dep: load.LoadDeployment,
    sample_size: int,
    timeout: float,
    request_timeout: float,
) -> dict[str, Any]:
    """Kill conductor 1; how soon the API shows its nodes elsewhere.

    load.wait_rehomed polls a sample of them one GET at a time (a ring
    changes all its answers at once, so the first node seen moved dates
    the change to within one request), then lists the nodes the API
    still routes to conductor 1 until none is left.
    """
    killed = dep.conductor_name(1)
    # A list that places every node waits behind the power syncs of a
    # saturated machine: 30 conductors over 100,000 nodes on two cores
    # made it outlast the load client's 120 s.
    client = load.Client(
        dep.api_port, timeout=request_timeout, retry_idle=True
    )
    try:
        start = time.monotonic()
        try:
            had = sorted(load.on_conductor(client, killed, dep.max_limit))
        except OSError as exc:
            return {'killed': killed, 'error': 'listing its nodes: %r' % exc}
        listed = time.monotonic() - start
        sample = random.Random(0).sample(had, min(sample_size, len(had)))
        figures: dict[str, Any] = {
            'killed': killed,
            'its_nodes': len(had),
            'list_seconds': round(listed, 2),
            'sample': len(sample),
        }
        crashed = time.monotonic()
        dep.crash(1)
        try:
            first, whole, asked, done = load.wait_rehomed(
                client, killed, sample, dep.max_limit, crashed, timeout
            )
        except (AssertionError, OSError) as exc:
            figures['error'] = str(exc) or repr(exc)
            return figures
    finally:
        client.close()
    figures.update(
        first_moved_seconds=round(first, 2),
        sample_moved_seconds=round(whole, 2),
        list_asked_seconds=round(asked, 2),
        rehome_seconds=round(done, 2),
    )
    return figures


# One ring


def _say(text: str) -> None:
    stamp = datetime.datetime.now().strftime('%H:%M:%S')
    print('%s %s' % (stamp, text), flush=True)


def measure(dep: ScaleDeployment, args: argparse.Namespace) -> dict[str, Any]:
    """Bootstrap, copy, start, wait, measure idle, restart, then fail
    over."""
    timings: dict[str, float | None] = {}

    def timed(name: str, action, *arguments):  # type: ignore[no-untyped-def]
        start = time.monotonic()
        value = action(*arguments)
        timings[name] = round(time.monotonic() - start, 1)
        return value

    node = timed('bootstrap_node', bootstrap_node, dep)
    timed('copy_nodes', copy_node, dep.database_url, node, args.nodes)
    _say('%d nodes in %.1f s' % (args.nodes, timings['copy_nodes']))
    offsets = log_sizes(dep, args.conductors)
    timed('start_conductors', dep.start_all, args.conductors)
    _say(
        '%d conductors up and routing in %.1f s'
        % (args.conductors, timings['start_conductors'])
    )
    synced = wait_first_syncs(dep, offsets, 2 * args.sync_interval + 60)
    timings['first_power_syncs'] = None if synced is None else round(synced)
    if synced is None:
        _say('WARNING: not every conductor ran a power sync; measuring anyway')
    time.sleep(args.settle)
    _say('measuring %d s of idle' % args.window)
    idle = timed('window', measure_idle, dep, args.window)
    # Said at once, so that a failover that goes wrong loses nothing.
    _say('idle: %s' % json.dumps(idle))
    restarts = timed('restarts', measure_restarts, dep, args.request_timeout)
    _say('restarts: %s' % json.dumps(restarts))
    _say('killing %s' % dep.conductor_name(1))
    failover = timed(
        'failover',
        measure_failover,
        dep,
        args.failover_sample,
        args.failover_timeout,
        args.request_timeout,
    )
    _say('failover: %s' % json.dumps(failover))
    return {
        'idle': idle,
        'restarts': restarts,
        'failover': failover,
        'timings': timings,
    }


def run(
    manager: str, args: argparse.Namespace, port: int, server: Server
) -> dict[str, Any]:
    """One ring on fresh deployments until one routes (see load.NotRouting:
    said, counted and reported, as the soak does)."""
    _say(
        '== %s: %d nodes, %d conductors from port %d'
        % (manager, args.nodes, args.conductors, port)
    )
    started = time.monotonic()
    discarded = []
    for _ in range(args.attempts):
        dep = ScaleDeployment(
            server,
            manager,
            deployment.IRONIC_DEFAULT_TIMERS,
            first_rpc_port=port,
            sync_interval=args.sync_interval,
            max_limit=max(1000, args.nodes),
        )
        try:
            with dep:
                result = measure(dep, args)
        except load.NotRouting as exc:
            _say('deployment discarded: %s' % exc)
            discarded.append(str(exc))
            continue
        result['ring'] = manager
        result['discarded'] = discarded
        result['timings']['run'] = round(time.monotonic() - started, 1)
        return result
    raise SystemExit(
        '%s: no deployment out of %d routed requests'
        % (manager, args.attempts)
    )


# The table


def _row(label: str, cells: list[str]) -> str:
    return '%-44s' % label + ''.join('%-26s' % c for c in cells)


def _spread(
    conductors: dict[str, dict[str, float]], key: str, form: str
) -> str:
    """mean (min-max) of one figure over the conductors."""
    values = [figures[key] for figures in conductors.values()]
    return (form + ' (' + form + '-' + form + ')') % (
        statistics.mean(values),
        min(values),
        max(values),
    )


# (label, path to the figure in a run's idle figures, format)
IDLE_ROWS = (
    ('nodes rows read/s (seq + idx)', ('nodes_rows_per_second',), '%.1f'),
    ('  by sequential scans', ('nodes_per_second', 'seq_tup_read'), '%.1f'),
    ('  by index', ('nodes_per_second', 'idx_tup_fetch'), '%.1f'),
    ('sequential scans of nodes/s', ('nodes_per_second', 'seq_scan'), '%.2f'),
    ('index scans of nodes/s', ('nodes_per_second', 'idx_scan'), '%.2f'),
    ('PostgreSQL CPU, % of one core', ('postgres_cpu_percent',), '%.2f'),
    (
        '  of which this database\'s backends',
        ('postgres_backends_cpu_percent',),
        '%.2f',
    ),
    (
        'connections to the database at the end',
        ('postgres_connections',),
        '%d',
    ),
    ('  opened in the window', ('postgres_connections_opened',), '%d'),
    ('  closed in the window', ('postgres_connections_closed',), '%d'),
    ('Redis operations/s', ('redis_ops_per_second',), '%.2f'),
    ('Redis CPU, % of one core', ('redis_cpu_percent',), '%.2f'),
    ('API CPU, % of one core', ('api', 'cpu_percent'), '%.2f'),
    ('API RSS, MiB (parent + worker)', ('api', 'rss_mib'), '%.0f'),
    ('API PSS, MiB', ('api', 'pss_mib'), '%.0f'),
    ('API threads', ('api', 'threads'), '%d'),
    ('all conductors, % of one core', ('conductors_cpu_percent',), '%.2f'),
    ('machine CPU, % of all cores', ('machine_cpu_percent',), '%.2f'),
    ('rest of the machine, % of one core', ('rest_cpu_percent',), '%.2f'),
    ('load average (1 min) at the end', ('loadavg_1min_at_end',), '%.2f'),
    ('other Ironic processes running', ('foreign_ironic_processes',), '%d'),
)
# Over the conductors, mean (min-max): (label, figure, format)
CONDUCTOR_ROWS = (
    ('conductor CPU, % of one core', 'cpu_percent', '%.2f'),
    ('conductor RSS, MiB (parent + worker)', 'rss_mib', '%.0f'),
    ('conductor PSS, MiB', 'pss_mib', '%.0f'),
    ('conductor threads', 'threads', '%.0f'),
)
# Redis commands shown one by one: the busiest of each run.
TOP_COMMANDS = 5


def _get(figures: dict[str, Any], path: tuple[str, ...]) -> Any:
    for key in path:
        figures = figures[key]
    return figures


def _idle_rows(idle: list[dict[str, Any]]) -> list[str]:
    lines = ['idle, over %s s' % ' / '.join(str(i['seconds']) for i in idle)]
    for label, path, form in IDLE_ROWS:
        lines.append(_row('  ' + label, [form % _get(i, path) for i in idle]))
        if path == ('redis_ops_per_second',):
            lines += _command_rows(idle)
        if path == ('api', 'threads'):
            lines += [
                _row(
                    '  ' + label,
                    [_spread(i['conductors'], key, form) for i in idle],
                )
                for label, key, form in CONDUCTOR_ROWS
            ]
    return lines


def _command_rows(idle: list[dict[str, Any]]) -> list[str]:
    """Redis operations/s of the busiest commands, one row each."""
    commands = sorted(
        {
            c
            for i in idle
            for c in list(i['redis_ops_by_command'])[:TOP_COMMANDS]
        }
    )
    return [
        _row(
            '    ' + command,
            ['%.2f' % i['redis_ops_by_command'].get(command, 0) for i in idle],
        )
        for command in commands
    ]


FAILOVER_ROWS = (
    ('killed', 'killed conductor'),
    ('its_nodes', 'its nodes'),
    ('list_seconds', 'listing them took, s'),
    ('sample', 'sample polled one by one'),
    ('first_moved_seconds', 'first sample node elsewhere after, s'),
    ('sample_moved_seconds', 'whole sample elsewhere after, s'),
    ('list_asked_seconds', 'empty ?conductor= list asked at, s'),
    ('rehome_seconds', 'empty list answered at, s'),
    ('error', 'error'),
)
RESTART_ROWS = (
    ('conductor', 'restarted conductor'),
    ('its_nodes', 'its nodes'),
    ('conductor_stop_seconds', 'its stop took, s'),
    ('conductor_restart_seconds', 'stop to started again, s'),
    ('nodes_moved', 'its nodes moved'),
    ('api_restart_seconds', 'API stop to answering again, s'),
)
TIMING_ROWS = (
    ('bootstrap_node', 'first node, through the API'),
    ('copy_nodes', 'copying the others'),
    ('start_conductors', 'conductors up and routing'),
    ('first_power_syncs', 'then every conductor power-synced'),
    ('window', 'idle window'),
    ('restarts', 'restarts'),
    ('failover', 'failover'),
    ('run', 'whole run, clean-up included'),
)


def render(results: list[dict[str, Any]], setup: dict[str, Any]) -> str:
    names = {'affinity': 'affinity ring', 'stock': 'stock ring'}
    lines = [
        'Scale on %(date)s: %(nodes)d nodes, %(conductors)d conductors, '
        'one API (1 worker); power sync every %(sync_interval)d s, '
        "Ironic's default timers %(timers)s" % setup,
        'Machine: %(cores)d cores (%(cpu)s), %(memory_gib)s GiB; Python '
        '%(python)s, Ironic %(ironic)s, PostgreSQL %(postgres)s '
        '(max_connections %(postgres_max_connections)d), Redis %(redis)s'
        % setup,
        'PostgreSQL measured: %(postgres_server)s' % setup,
        'Plugin from %(plugin)s' % setup,
    ]
    if any(r['idle']['foreign_ironic_processes'] for r in results):
        lines.append(
            'WARNING: another Ironic ran on this machine during a window '
            '(see "other Ironic processes"): its load is in the figures.'
        )
    lines += [
        '',
        _row('', [names.get(r['ring'], r['ring']) for r in results]),
    ]
    lines += _idle_rows([r['idle'] for r in results])
    lines.append('restarts, one process at a time (SIGUSR1 first)')
    for key, label in RESTART_ROWS:
        cells = [str(r['restarts'].get(key, '-')) for r in results]
        lines.append(_row('  ' + label, cells))
    lines.append('failover (seconds from the SIGKILL)')
    for key, label in FAILOVER_ROWS:
        cells = [str(r['failover'].get(key, '-')) for r in results]
        if key != 'error' or any(c != '-' for c in cells):
            lines.append(_row('  ' + label, cells))
    lines.append('time taken, s')
    for key, label in TIMING_ROWS:
        cells = [str(r['timings'].get(key, '-')) for r in results]
        lines.append(_row('  ' + label, cells))
    discarded = [str(len(r['discarded'])) for r in results]
    if any(d != '0' for d in discarded):
        lines.append(_row('deployments discarded', discarded))
    return '\n'.join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--conductors', type=int, default=8)
    parser.add_argument('--nodes', type=int, default=20000)
    parser.add_argument(
        '--window',
        type=float,
        default=180.0,
        help='idle seconds measured (default: 180, three power syncs)',
    )
    parser.add_argument(
        '--settle',
        type=float,
        default=30.0,
        help='seconds between the first power syncs and the window',
    )
    parser.add_argument(
        '--managers',
        default='affinity,stock',
        help='comma-separated [affinity]hash_ring_manager values, run in '
        'order (default: affinity,stock)',
    )
    parser.add_argument('--sync-interval', type=int, default=60)
    parser.add_argument(
        '--failover-sample',
        type=int,
        default=20,
        help="conductor 1's nodes polled one by one after its crash",
    )
    parser.add_argument('--failover-timeout', type=float, default=180.0)
    parser.add_argument(
        '--request-timeout',
        type=float,
        default=900.0,
        help='seconds a list of the nodes on a conductor may take during '
        'the failover (default: 900)',
    )
    parser.add_argument(
        '--attempts',
        type=int,
        default=3,
        help='deployments to try per ring when the API routes no request '
        'once the conductors are up (default: 3)',
    )
    parser.add_argument('--first-rpc-port', type=int, default=FIRST_RPC_PORT)
    parser.add_argument(
        '--own-postgres',
        action='store_true',
        help='run on a PostgreSQL cluster of its own, made for the run '
        '(the default when the shared server has too few connections)',
    )
    parser.add_argument('--json', metavar='FILE', help='write results here')
    args = parser.parse_args()
    managers = args.managers.split(',')
    if args.conductors < 2:
        parser.error('--conductors below 2: none left to fail over to')
    if args.conductors < 3 and 'affinity' in managers:
        # load.CONDUCTOR_TAGS: each node is refused by one conductor of
        # three, so that from three on a crash orphans nothing.
        parser.error('--conductors below 3: the crash would orphan nodes')
    if args.first_rpc_port < load.FIRST_RPC_PORT:
        parser.error('--first-rpc-port below %d' % load.FIRST_RPC_PORT)
    signal.signal(signal.SIGTERM, _terminated)
    with postgres_server(args) as server:
        return benchmark(args, managers, server)


def _terminated(signum: int, frame: object) -> None:
    """SIGTERM (timeout(1), the end of a CI job) ends the run as Ctrl-C
    does, through every clean-up: the deployment's processes stopped,
    its database dropped, the run's own PostgreSQL removed. A second one
    is ignored, not to cut those short."""
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    raise SystemExit(128 + signum)


def benchmark(
    args: argparse.Namespace, managers: list[str], server: Server
) -> int:
    """Every ring, one after the other, on ``server``; the table."""
    setup = dict(
        _machine(server.url),
        postgres_server=server.describe(),
        postgres_own=server.own,
        postgres_settings=_configured(server.url),
        date=datetime.date.today().isoformat(),
        nodes=args.nodes,
        conductors=args.conductors,
        sync_interval=args.sync_interval,
        timers=json.dumps(deployment.IRONIC_DEFAULT_TIMERS),
        window=args.window,
        settle=args.settle,
    )
    # Each ring's conductors on ports of their own, in blocks of ten.
    block = 10 * -(-args.conductors // 10)
    results = []
    for offset, manager in enumerate(managers):
        port = args.first_rpc_port + block * offset
        results.append(run(manager, args, port, server))
    print()
    print(render(results, setup))
    if args.json:
        with open(args.json, 'w') as handle:
            json.dump({'setup': setup, 'results': results}, handle, indent=2)
    return 0 if all('error' not in r['failover'] for r in results) else 1


if __name__ == '__main__':
    sys.exit(main())
