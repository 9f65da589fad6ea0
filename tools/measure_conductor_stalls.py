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

"""Do conductors keep their timers while the node tag cache reads?

Starts a real Ironic (the running Python's: 29 monkey-patches eventlet,
32 and later run threads) with --conductors conductors on a scratch
PostgreSQL database, inserts --nodes nodes straight into Ironic's schema
(in maintenance, so that Ironic's own periodic tasks skip them in the
database query; the tag cache still reads every one), creates --normal
fake-hardware nodes through the API for power sync to work, and watches
for --minutes:

* heartbeats: the gaps between successive ``conductors.updated_at`` of
  each conductor (Ironic stamps it on every heartbeat), against
  ``[conductor]heartbeat_interval`` (1 s here);
* power sync: the gaps between successive "Attempting to get shared lock
  on node ... (for power state sync)" debug lines of each normal node,
  against ``[conductor]sync_power_state_interval`` (2 s here);
* event loop: a probe started inside each conductor worker by this
  script's wrapper (never by the product) sleeps 20 ms again and again
  and records how late it wakes up; under eventlet it is a green thread,
  so it wakes late exactly when something holds the hub;
* json-rpc: the answer time of each conductor's json-rpc port to a
  request for a method that does not exist.

The tag cache is made to work hard: its first read (every row) happens
inside the window, ``[affinity]node_tags_rescan_interval`` is --rescan
seconds, and every --touch seconds all the inserted nodes get a new
``updated_at`` (a mass change), so the following incremental reads
return every row again for the cache's 30 s margin.

With --managers stock,affinity both rings run one after the other
--repeat times each, alternating, on the same machine state; ``stock``
(Ironic's own ring) has no tag cache and no membership: the baseline.
Needs Ironic, psycopg2, PostgreSQL and redis-server (the e2e tox
environments)::

    .tox/e2e-2025.1/bin/python tools/measure_conductor_stalls.py \\
        --managers stock,affinity --repeat 2 --minutes 2

Conductors listen from --first-rpc-port (8391 by default: clear of the
end-to-end tests' 8091-8095, the load test's 8191-8193 and the soak's
8291-8313).
"""

import argparse
import datetime
import json
import os
import platform
import re
import statistics
import sys
import threading
import time
from typing import Any
import urllib.error
import urllib.request
import uuid as uuidlib

import sqlalchemy as sa

from ironic_affinity.tests.e2e import deployment

HEARTBEAT_INTERVAL = deployment.CI_TIMERS['heartbeat']
# Fixed by the deployment's ironic.conf.
SYNC_INTERVAL = 2.0
PROBE_PERIOD = 0.02

# The conductor command this script starts: Ironic's (through our
# launcher, as operators do) plus the probe. Ironic's command module is
# imported first, as the launcher does, so that under Ironic 29 the probe
# thread is a green thread of the patched process.
_WRAPPER = '''#!{python}
import sys

from ironic_affinity.integration import launchers

launchers.ironic_command('conductor')

import os  # noqa: E402
import threading  # noqa: E402
import time  # noqa: E402

from ironic.conductor import rpc_service  # noqa: E402

_original_start = rpc_service.RPCService.start


def _probe(path):
    patcher = sys.modules.get('eventlet.patcher')
    with open(path, 'w') as out:
        out.write('# eventlet imported: %s; threads green: %s\\n' % (
            'eventlet' in sys.modules,
            bool(patcher and patcher.is_monkey_patched('thread'))))
        flushed = time.monotonic()
        while True:
            before = time.monotonic()
            time.sleep({period})
            after = time.monotonic()
            out.write('%.3f %.2f\\n' % (
                time.time(), (after - before - {period}) * 1e3))
            if after - flushed > 1:
                out.flush()
                flushed = after


def _start(self):
    _original_start(self)
    path = os.path.join({directory!r}, 'probe-%s.txt' % (
        self.manager.host.replace(':', '_')))
    threading.Thread(target=_probe, args=(path,), daemon=True).start()


rpc_service.RPCService.start = _start
sys.exit(launchers.conductor())
'''

_LOG_TIME = re.compile(
    r'^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d+) .*Attempting to get shared '
    r'lock on node (\S+) \(for power state sync\)',
    re.MULTILINE,
)


def _utcnow() -> datetime.datetime:
    """Naive UTC, as Ironic stamps its rows."""
    return datetime.datetime.now(datetime.timezone.utc).replace(tzinfo=None)


def _percentile(values: list[float], fraction: float) -> float:
    if not values:
        return float('nan')
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def _gaps(stamps: list[float]) -> list[float]:
    stamps = sorted(stamps)
    return [b - a for a, b in zip(stamps, stamps[1:], strict=False)]


def _insert_nodes(url: str, count: int) -> float:
    """``count`` maintenance nodes with tags, straight into Ironic's table."""
    engine = sa.create_engine(url)
    nodes = sa.table(
        'nodes',
        sa.column('uuid'),
        sa.column('name'),
        sa.column('driver'),
        sa.column('extra'),
        sa.column('maintenance'),
        sa.column('maintenance_reason'),
        sa.column('provision_state'),
        sa.column('power_state'),
        sa.column('created_at'),
        sa.column('updated_at'),
        sa.column('version'),
    )
    vocabulary = ['rack%d' % i for i in range(40)] + ['dc1', 'dc2', 'dc3']
    stamp = _utcnow() - datetime.timedelta(hours=1)
    start = time.perf_counter()
    with engine.begin() as connection:
        for offset in range(0, count, 5000):
            connection.execute(
                nodes.insert(),
                [
                    {
                        'uuid': str(uuidlib.uuid4()),
                        'name': 'bulk-%d' % i,
                        'driver': 'fake-hardware',
                        'extra': json.dumps(
                            {
                                'affinity_tags': '%s %s'
                                % (
                                    vocabulary[i % 40],
                                    vocabulary[40 + i % 3],
                                ),
                                'asset': 'bulk-%d' % i,
                            }
                        ),
                        'maintenance': True,
                        'maintenance_reason': 'stall measurement',
                        'provision_state': 'manageable',
                        'power_state': 'power off',
                        'created_at': stamp,
                        'updated_at': None,
                        'version': '1.40',
                    }
                    for i in range(offset, min(count, offset + 5000))
                ],
            )
    engine.dispose()
    return time.perf_counter() - start


class _Watcher:
    """Heartbeats from the database and json-rpc answer times, polled."""

    def __init__(self, dep: deployment.Deployment, conductors: int) -> None:
        self.dep = dep
        self.ports = [dep.first_rpc_port + i for i in range(conductors)]
        self.beats: dict[str, set[datetime.datetime]] = {}
        self.rpc: dict[int, list[float]] = {port: [] for port in self.ports}
        self.rpc_failures = 0
        self._stop = threading.Event()
        self._engine = sa.create_engine(dep.database_url, pool_size=1)
        self._threads = [
            threading.Thread(target=self._beats, daemon=True),
            threading.Thread(target=self._rpc, daemon=True),
        ]

    def start(self) -> None:
        for thread in self._threads:
            thread.start()

    def stop(self) -> None:
        if self._stop.is_set():
            return
        self._stop.set()
        for thread in self._threads:
            thread.join(30)
        self._engine.dispose()

    def _beats(self) -> None:
        query = sa.text('SELECT hostname, updated_at FROM conductors')
        while not self._stop.wait(0.2):
            with self._engine.connect() as connection:
                for host, stamp in connection.execute(query):
                    if stamp is not None:
                        self.beats.setdefault(host, set()).add(stamp)

    def _rpc(self) -> None:
        body = json.dumps(
            {'jsonrpc': '2.0', 'method': 'no_such_method', 'id': 1}
        ).encode()
        while not self._stop.wait(0.25):
            for port in self.ports:
                request = urllib.request.Request(
                    'http://127.0.0.1:%d/' % port,
                    data=body,
                    headers={'Content-Type': 'application/json'},
                )
                start = time.perf_counter()
                try:
                    with urllib.request.urlopen(request, timeout=30) as r:
                        r.read()
                except urllib.error.HTTPError:
                    pass  # an answer all the same
                except OSError:
                    self.rpc_failures += 1
                    continue
                self.rpc[port].append(time.perf_counter() - start)


def _probe_samples(directory: str) -> tuple[list[float], list[str]]:
    samples: list[float] = []
    notes: list[str] = []
    for name in sorted(os.listdir(directory)):
        if not (name.startswith('probe-') and name.endswith('.txt')):
            continue
        with open(os.path.join(directory, name)) as handle:
            for line in handle:
                if line.startswith('#'):
                    notes.append(line[1:].strip())
                elif line.strip():
                    samples.append(float(line.split()[1]))
    return samples, notes


def _power_sync_gaps(
    dep: deployment.Deployment, normal: set[str], since: float
) -> list[float]:
    stamps: dict[str, list[float]] = {}
    for name in dep.processes:
        if not name.startswith('conductor'):
            continue
        for when, node in _LOG_TIME.findall(dep.log(name)):
            if node not in normal:
                continue
            moment = datetime.datetime.strptime(
                when, '%Y-%m-%d %H:%M:%S.%f'
            ).timestamp()
            if moment >= since:
                stamps.setdefault(node, []).append(moment)
    return [gap for node in stamps.values() for gap in _gaps(node)]


def _create(dep: deployment.Deployment, name: str) -> str:
    """POST a node, again while the API cannot route yet."""
    deadline = time.monotonic() + 60
    while True:
        status, body = dep.post_node(name, 'dc1')
        if status == 201:
            return str(body['uuid'])
        if time.monotonic() > deadline:
            raise AssertionError('cannot create %s: %s' % (name, body))
        time.sleep(0.5)


def run(manager: str, args: argparse.Namespace) -> dict[str, Any]:
    dep = deployment.Deployment(
        manager=manager, first_rpc_port=args.first_rpc_port
    )
    dep.setUp()
    try:
        inserted = _insert_nodes(dep.database_url, args.nodes)
        wrapper = os.path.join(dep.dir, 'conductor-with-probe')
        with open(wrapper, 'w') as handle:
            handle.write(
                _WRAPPER.format(
                    python=sys.executable,
                    directory=dep.dir,
                    period=PROBE_PERIOD,
                )
            )
        os.chmod(wrapper, 0o755)
        for index in range(1, args.conductors + 1):
            dep.start_conductor(
                index,
                program=wrapper,
                node_tags_rescan_interval=str(args.rescan),
            )
        dep.wait_conductors(*range(1, args.conductors + 1), timeout=120)
        since = time.time()
        watcher = _Watcher(dep, args.conductors)
        watcher.start()
        dep.addCleanup(watcher.stop)
        # The conductors' first lookups (the first read of every row
        # with the plugin) come with the first power sync of these.
        normal = {_create(dep, 'normal-%d' % i) for i in range(args.normal)}
        engine = sa.create_engine(dep.database_url, pool_size=1)
        touches = 0
        end = time.monotonic() + args.minutes * 60
        next_touch = time.monotonic() + args.touch
        while time.monotonic() < end:
            time.sleep(min(1.0, max(0.0, end - time.monotonic())))
            if args.touch and time.monotonic() >= next_touch:
                with engine.begin() as connection:
                    connection.execute(
                        sa.text(
                            'UPDATE nodes SET updated_at = :now '
                            'WHERE maintenance'
                        ),
                        {'now': _utcnow()},
                    )
                touches += 1
                next_touch += args.touch
        engine.dispose()
        watcher.stop()
        beat_gaps = [
            gap
            for host, stamps in watcher.beats.items()
            for gap in _gaps([s.timestamp() for s in stamps])
        ]
        sync_gaps = _power_sync_gaps(dep, normal, since)
        probe, notes = _probe_samples(dep.dir)
        rpc = [t for times in watcher.rpc.values() for t in times]
        return {
            'manager': manager,
            'inserted_s': round(inserted, 1),
            'touches': touches,
            'heartbeat_gaps': len(beat_gaps),
            'heartbeat_max': max(beat_gaps, default=float('nan')),
            'heartbeat_p99': _percentile(beat_gaps, 0.99),
            'sync_gaps': len(sync_gaps),
            'sync_max': max(sync_gaps, default=float('nan')),
            'sync_p99': _percentile(sync_gaps, 0.99),
            'sync_median': (
                statistics.median(sync_gaps) if sync_gaps else float('nan')
            ),
            'probe_samples': len(probe),
            'probe_max_ms': max(probe, default=float('nan')),
            'probe_p99_ms': _percentile(probe, 0.99),
            'probe_over_100ms': sum(1 for p in probe if p > 100),
            'rpc_max_ms': max(rpc, default=float('nan')) * 1e3,
            'rpc_p99_ms': _percentile(rpc, 0.99) * 1e3,
            'rpc_failures': watcher.rpc_failures,
            'eventlet': sorted(set(notes)),
        }
    finally:
        dep.cleanUp()


def _ironic_version() -> str:
    from importlib import metadata

    return metadata.version('ironic')


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--nodes', type=int, default=100_000)
    parser.add_argument('--normal', type=int, default=6)
    parser.add_argument('--conductors', type=int, default=3)
    parser.add_argument('--minutes', type=float, default=3.0)
    parser.add_argument(
        '--rescan',
        type=float,
        default=5.0,
        help='[affinity]node_tags_rescan_interval of the conductors',
    )
    parser.add_argument(
        '--touch',
        type=float,
        default=60.0,
        help='seconds between two mass changes of every inserted node '
        '(0: none)',
    )
    parser.add_argument('--managers', default='stock,affinity')
    parser.add_argument('--repeat', type=int, default=2)
    parser.add_argument('--first-rpc-port', type=int, default=8391)
    parser.add_argument('--json', help='append each run as a JSON line')
    args = parser.parse_args()
    managers = args.managers.split(',')
    print(
        '# %s, Ironic %s, Python %s, %d nodes (+%d normal), %d conductors, '
        '%.1f min, rescan %.0f s, touch every %.0f s; heartbeat %d s, '
        'power sync %.0f s'
        % (
            datetime.date.today(),
            _ironic_version(),
            platform.python_version(),
            args.nodes,
            args.normal,
            args.conductors,
            args.minutes,
            args.rescan,
            args.touch,
            HEARTBEAT_INTERVAL,
            SYNC_INTERVAL,
        )
    )
    print(
        '%-8s %14s %14s %16s %14s  %s'
        % (
            'ring',
            'beat max/p99',
            'sync max/p99',
            'probe max/p99 ms',
            'rpc max/p99 ms',
            'eventlet',
        )
    )
    for _ in range(args.repeat):
        for manager in managers:
            result = run(manager, args)
            result.update(
                ironic=_ironic_version(),
                python=platform.python_version(),
                nodes=args.nodes,
                date=str(datetime.date.today()),
            )
            print(
                '%-8s %6.2f/%5.2f s %6.2f/%5.2f s %8.0f/%6.0f %7.0f/%6.0f  %s'
                % (
                    manager,
                    result['heartbeat_max'],
                    result['heartbeat_p99'],
                    result['sync_max'],
                    result['sync_p99'],
                    result['probe_max_ms'],
                    result['probe_p99_ms'],
                    result['rpc_max_ms'],
                    result['rpc_p99_ms'],
                    '; '.join(result['eventlet']),
                ),
                flush=True,
            )
            if args.json:
                with open(args.json, 'a') as out:
                    out.write(json.dumps(result) + '\n')
    return 0


if __name__ == '__main__':
    sys.exit(main())
