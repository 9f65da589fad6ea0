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

"""Takeovers pending while a running deployment switches to affinity
placement, paced and unpaced, side by side (issue 29).

A real Ironic (one API and --conductors conductors through the plugin's
launchers, all voting ``hash_ring_manager = stock`` at first) over
--nodes ACTIVE fake-hardware nodes, each already taken over by the
conductor Ironic's ring gives it (``conductor_affinity`` set in SQL, as
a deployment that has run for a while has it). Node i carries soft tag
``rack<i mod C>`` and conductor j prefers ``rack<j-1>``, so that about
(C-1)/C of the nodes change conductor with the switch. Then each
conductor is restarted voting ``affinity``, one after the other; the
last restart makes the switch due. Ironic's periodic takeover
(``_sync_local_state``) runs every --takeover-interval seconds, at most
``[conductor]periodic_max_workers`` (8) nodes per conductor per run.

Twice: with ``[affinity]adoption_period = 0`` (every node moves at the
switch: what a deployment without adoption gets) and unset (sized by the
takeover rule). Every --sample seconds it reads ``GET /v1/affinity``'s
``placement`` (the API's own count of ACTIVE nodes whose conductor has
not taken them over yet, the metric ``placement.takeovers_pending``) and
prints both series, minute by minute, with each run's peak and the
seconds until no takeover is pending.

Nodes are copied in SQL from one created through the API, as
benchmark_scale.py does. Needs what tox -e e2e installs, PostgreSQL and
redis-server::

    .tox/e2e/bin/python tools/measure_adoption_takeovers.py \\
        --nodes 10000 --conductors 10 [--takeover-interval 5] [--json F]
"""

import argparse
import json
import os
import sys
import threading
import time
from typing import Any

import sqlalchemy as sa
from tooz import hashring

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import benchmark_scale  # noqa: E402

from ironic_affinity import adoption  # noqa: E402
from ironic_affinity.tests.e2e import deployment  # noqa: E402

# Ironic's [DEFAULT]hash_partition_exponent, default.
PARTITIONS = 2**5
FIRST_RPC_PORT = 8491
# [affinity]node_tags_rescan_interval here, in seconds.
RESCAN = 10


def say(text: str) -> None:
    print('[%s] %s' % (time.strftime('%H:%M:%S'), text), flush=True)


def rack(index: int, conductors: int) -> str:
    return 'rack%d' % (index % conductors)


def prepare_nodes(url: str, conductors: int, ring_hosts: dict[int, str]):
    """Tags, ACTIVE and power on for every node, and each taken over by
    the conductor Ironic's ring gives it."""
    engine = sa.create_engine(url)
    try:
        with engine.begin() as connection:
            rows = connection.execute(
                sa.text('SELECT id, uuid FROM nodes ORDER BY id')
            ).all()
            ring = hashring.HashRing(
                set(ring_hosts.values()), partitions=PARTITIONS
            )
            by_host = {host: ident for ident, host in ring_hosts.items()}
            uuids = [uuid for _id, uuid in rows]
            extras = [
                json.dumps({'affinity_tags': rack(i, conductors)})
                for i in range(len(rows))
            ]
            taken = [
                by_host[ring.get_nodes(uuid.encode('utf-8')).pop()]
                for uuid in uuids
            ]
            connection.execute(
                sa.text(
                    "UPDATE nodes SET provision_state = 'active', "
                    "power_state = 'power on', extra = data.extra, "
                    'conductor_affinity = data.taken FROM unnest('
                    'CAST(:uuids AS text[]), CAST(:extras AS text[]), '
                    'CAST(:taken AS int[])) AS data(uuid, extra, taken) '
                    'WHERE nodes.uuid = data.uuid'
                ),
                {'uuids': uuids, 'extras': extras, 'taken': taken},
            )
    finally:
        engine.dispose()


def conductor_ids(url: str) -> dict[int, str]:
    engine = sa.create_engine(url)
    try:
        with engine.connect() as connection:
            return dict(
                connection.execute(
                    sa.text('SELECT id, hostname FROM conductors')
                ).all()
            )
    finally:
        engine.dispose()


class Sampler(threading.Thread):
    """``GET /v1/affinity``'s placement every ``every`` seconds."""

    def __init__(self, dep: deployment.Deployment, every: float) -> None:
        super().__init__(daemon=True)
        self.dep = dep
        self.every = every
        self.samples: list[tuple[float, dict[str, Any]]] = []
        self.errors = 0
        self._stop_event = threading.Event()

    def run(self) -> None:
        while not self._stop_event.wait(self.every):
            try:
                status, body = self.dep._request('GET', '/v1/affinity')
            except OSError:
                self.errors += 1
                continue
            if status != 200:
                self.errors += 1
                continue
            self.samples.append((time.time(), body['placement']))

    def stop(self) -> None:
        self._stop_event.set()
        self.join(60)


def restart(dep: deployment.Deployment, index: int, manager: str) -> None:
    benchmark_scale.stop_cleanly(dep, 'conductor%d' % index)
    dep.start_conductor(
        index,
        soft_affinity_tags=rack(index - 1, dep.conductor_count),
        hash_ring_manager=manager,
    )
    dep.wait_conductors(index, timeout=180)


def one_run(
    args: argparse.Namespace,
    server: benchmark_scale.Server,
    period: int | None,
    port: int,
) -> dict[str, Any]:
    # The nodes are written in SQL, not through the API: a short rescan
    # lets every process read them (and the recorder size the period by
    # them) before the switch.
    extra = (
        '\n[conductor]\nsync_local_state_interval = %d\n'
        '[affinity]\nnode_tags_rescan_interval = %d\n'
        % (args.takeover_interval, RESCAN)
    )
    if period is not None:
        extra += 'adoption_period = %d\n' % period
    dep = benchmark_scale.ScaleDeployment(
        server,
        'stock',
        deployment.IRONIC_DEFAULT_TIMERS,
        first_rpc_port=port,
        sync_interval=3600,  # no power sync: takeovers alone are measured
        max_limit=max(1000, args.nodes),
    )
    # Every process through the plugin's launchers, voting stock.
    dep.plain = False
    dep.api = 'launcher'
    dep.extra_conf = extra
    dep.conductor_count = args.conductors
    with dep:
        dep.start_conductor(
            1,
            soft_affinity_tags=rack(0, args.conductors),
            hash_ring_manager='stock',
        )
        dep.wait_conductors(1, timeout=180)
        first = dep.create_node(benchmark_scale.NAME % 0, rack(0, 1))
        benchmark_scale.stop_cleanly(dep, 'conductor1')
        benchmark_scale.copy_node(dep.database_url, first, args.nodes)
        for index in range(1, args.conductors + 1):
            dep.start_conductor(
                index,
                soft_affinity_tags=rack(index - 1, args.conductors),
                hash_ring_manager='stock',
            )
        dep.wait_conductors(*range(1, args.conductors + 1), timeout=300)
        prepare_nodes(
            dep.database_url, args.conductors, conductor_ids(dep.database_url)
        )
        say('%d ACTIVE nodes taken over on Ironic\'s ring' % args.nodes)
        # Let every tag cache read the tags just written: one rescan by
        # the process that reads the database, one refresh by the others.
        time.sleep(max(args.settle, 2 * RESCAN + 5))
        sampler = Sampler(dep, args.sample)
        sampler.start()
        for index in range(1, args.conductors + 1):
            restart(dep, index, 'affinity')
            say('conductor %d votes affinity' % index)
        switched = time.time()
        deadline = switched + args.timeout

        def done() -> bool:
            if not sampler.samples:
                return False
            at, last = sampler.samples[-1]
            return (
                at > switched + 60
                and last.get('state') == 'affinity'
                and last.get('takeovers_pending') == 0
            )

        while time.time() < deadline and not done():
            time.sleep(args.sample)
        sampler.stop()
    series = [
        (round(at - switched, 1), p.get('takeovers_pending'), p.get('state'))
        for at, p in sampler.samples
    ]
    # From the first sample off Ironic's ring: before it, what is
    # pending is Ironic's own ring moving nodes as each conductor
    # restarts (away from it, then back).
    begun = next(
        (
            at
            for at, _count, state in series
            if at > -args.sample * 4 and state != 'stock'
        ),
        0.0,
    )
    pending = [
        count
        for at, count, _state in series
        if at >= begun and count is not None
    ]
    before = [
        count
        for at, count, _state in series
        if at < begun and count is not None
    ]
    cleared = next(
        (
            at
            for at, count, state in series
            if at > 0 and count == 0 and state == 'affinity'
        ),
        None,
    )
    return {
        'adoption_period': 'unset (sized)' if period is None else period,
        'sized_period': adoption.takeover_period(
            args.nodes, args.conductors, 8, args.takeover_interval
        ),
        'series': series,
        'peak_pending': max(pending, default=None),
        'peak_pending_at_restarts': max(before, default=None),
        'switch_begun': begun,
        'seconds_to_no_pending': cleared,
        'sample_errors': sampler.errors,
    }


def by_minute(series: list[tuple[float, Any, Any]]) -> dict[int, Any]:
    found: dict[int, Any] = {}
    for at, count, _state in series:
        if at >= 0:
            found.setdefault(int(at // 60), count)
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--nodes', type=int, default=10000)
    parser.add_argument('--conductors', type=int, default=10)
    parser.add_argument('--takeover-interval', type=int, default=5)
    parser.add_argument('--sample', type=float, default=15.0)
    parser.add_argument('--settle', type=float, default=30.0)
    parser.add_argument('--timeout', type=float, default=3600.0)
    parser.add_argument('--own-postgres', action='store_true')
    parser.add_argument('--json')
    parser.add_argument(
        '--runs', default='unpaced,paced', help='which runs, in order'
    )
    args = parser.parse_args()
    results = {}
    with benchmark_scale.postgres_server(args) as server:
        for name, period, port in (
            ('unpaced', 0, FIRST_RPC_PORT),
            ('paced', None, FIRST_RPC_PORT + 100),
        ):
            if name not in args.runs.split(','):
                continue
            say('== %s' % name)
            results[name] = one_run(args, server, period, port)
            say(
                '%s: peak %s pending, none pending after %s s'
                % (
                    name,
                    results[name]['peak_pending'],
                    results[name]['seconds_to_no_pending'],
                )
            )
    empty: dict[str, Any] = {'series': []}
    unpaced = by_minute(results.get('unpaced', empty)['series'])
    paced = by_minute(results.get('paced', empty)['series'])
    minutes = sorted(set(unpaced) | set(paced))
    print('\nTakeovers pending, by minute from the last conductor\'s switch')
    print('%8s %10s %10s' % ('minute', 'unpaced', 'paced'))
    for minute in minutes:
        print(
            '%8d %10s %10s'
            % (minute, unpaced.get(minute, '-'), paced.get(minute, '-'))
        )
    for name, result in results.items():
        print(
            '%s: adoption_period %s (sized: %.0f s); peak %s from the '
            'switch (%s while the conductors restarted on Ironic\'s ring); '
            'none pending after %s s'
            % (
                name,
                result['adoption_period'],
                result['sized_period'],
                result['peak_pending'],
                result['peak_pending_at_restarts'],
                result['seconds_to_no_pending'],
            )
        )
    if args.json:
        with open(args.json, 'w') as handle:
            json.dump(
                {
                    'nodes': args.nodes,
                    'conductors': args.conductors,
                    'takeover_interval': args.takeover_interval,
                    'results': results,
                },
                handle,
                indent=1,
            )
    return 0


if __name__ == '__main__':
    sys.exit(main())
