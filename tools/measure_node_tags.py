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

"""What the node-tag cache costs at 100,000 nodes, on Ironic's schema.

Creates a scratch PostgreSQL database with Ironic's own schema
(ironic-dbsync), inserts N nodes with affinity tags in ``extra``, and
times the cache: the first full read, a fast refresh when nothing
changed, a fast refresh after 100 nodes changed, and the periodic full
re-read of uuid and extra of every node (which bounds staleness whatever
the writers' clocks), with nothing changed and after 100 nodes changed
with stamps 5 minutes in the past; wall and CPU time of each, and the
memory the cache holds. The database is dropped at the end.

Needs Ironic installed (tox -e e2e has it)::

    python tools/measure_node_tags.py [--nodes 100000]
"""

import argparse
import datetime
import json
import os
import random
import resource
import statistics
import subprocess
import sys
import tempfile
import time
import uuid

import sqlalchemy as sa

from ironic_affinity.integration import node_tags

POSTGRES = os.environ.get(
    'IRONIC_AFFINITY_E2E_POSTGRES', 'postgresql+psycopg2://postgres@127.0.0.1'
)


def _rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _timed(action) -> float:  # type: ignore[no-untyped-def]
    start = time.perf_counter()
    action()
    return time.perf_counter() - start


def _timed_cpu(action) -> tuple[float, float]:  # type: ignore[no-untyped-def]
    """Wall and CPU seconds of this process."""
    start, cpu = time.perf_counter(), time.process_time()
    action()
    return time.perf_counter() - start, time.process_time() - cpu


class _Clock:
    """The cache's monotonic clock, moved by hand to make a full
    re-read due."""

    def __init__(self) -> None:
        self.offset = 0.0

    def __call__(self) -> float:
        return time.monotonic() + self.offset


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--nodes', type=int, default=100_000)
    args = parser.parse_args()
    name = 'ironic_affinity_tags_%s' % uuid.uuid4().hex[:8]
    admin = sa.create_engine(
        POSTGRES + '/postgres', isolation_level='AUTOCOMMIT'
    )
    with admin.connect() as connection:
        connection.execute(sa.text('CREATE DATABASE %s' % name))
    url = '%s/%s' % (POSTGRES, name)
    try:
        with tempfile.NamedTemporaryFile('w', suffix='.conf') as conf:
            conf.write('[database]\nconnection = %s\n' % url)
            conf.flush()
            subprocess.run(
                [
                    os.path.join(
                        os.path.dirname(sys.executable), 'ironic-dbsync'
                    ),
                    '--config-file',
                    conf.name,
                    'create_schema',
                ],
                check=True,
                capture_output=True,
            )
        rng = random.Random(20261130)
        vocabulary = (
            ['rack%d' % i for i in range(40)]
            + ['network%d' % i for i in range(8)]
            + ['dc1', 'dc2', 'dc3']
        )
        engine = sa.create_engine(url)
        nodes = sa.table(
            'nodes',
            sa.column('uuid'),
            sa.column('driver'),
            sa.column('extra'),
            sa.column('created_at'),
            sa.column('updated_at'),
            sa.column('version'),
        )
        # Enrolled an hour ago: the steady state, not an enrollment burst.
        now = datetime.datetime.utcnow() - datetime.timedelta(hours=1)
        uuids = [
            str(uuid.UUID(int=rng.getrandbits(128))) for _ in range(args.nodes)
        ]
        start = time.perf_counter()
        with engine.begin() as connection:
            for offset in range(0, args.nodes, 5000):
                connection.execute(
                    nodes.insert(),
                    [
                        {
                            'uuid': u,
                            'driver': 'fake-hardware',
                            'extra': json.dumps(
                                {
                                    'affinity_tags': ' '.join(
                                        rng.sample(vocabulary, 3)
                                    )
                                }
                            ),
                            'created_at': now,
                            'updated_at': None,
                            'version': '1.40',
                        }
                        for u in uuids[offset : offset + 5000]
                    ],
                )
        print(
            'inserted %d nodes in %.1f s'
            % (args.nodes, time.perf_counter() - start)
        )

        rss_before = _rss_mib()
        clock = _Clock()
        cache = node_tags.NodeTagCache(
            url, 'affinity_tags', 2.0, 60.0, clock=clock
        )
        first = _timed(cache.refresh)
        print(
            'first full read:            %8.1f ms  (%d rows, %d cached)'
            % (first * 1e3, cache.last_rows, len(cache))
        )
        print(
            'cache memory (max RSS growth): %5.1f MiB'
            % (_rss_mib() - rss_before)
        )
        idle = min(_timed(cache.refresh) for _ in range(5))
        print(
            'fast refresh, nothing changed:   %8.1f ms  (%d rows)'
            % (idle * 1e3, cache.last_rows)
        )

        def change(extra: str, behind: datetime.timedelta) -> list[str]:
            picked = rng.sample(uuids, 100)
            with engine.begin() as connection:
                connection.execute(
                    sa.text(
                        "UPDATE nodes SET extra = :extra, updated_at = :now "
                        "WHERE uuid = ANY(:uuids)"
                    ),
                    {
                        'extra': json.dumps({'affinity_tags': extra}),
                        'now': datetime.datetime.utcnow() - behind,
                        'uuids': picked,
                    },
                )
            return picked

        def seen(picked: list[str], tag: str) -> str:
            return (
                'updated'
                if all(cache.get(u) == frozenset({tag}) for u in picked)
                else 'NOT updated'
            )

        changed = change('rack99', datetime.timedelta(0))
        busy = _timed(cache.refresh)
        print(
            'fast refresh, 100 nodes changed: %8.1f ms  (%d rows, tags %s)'
            % (busy * 1e3, cache.last_rows, seen(changed, 'rack99'))
        )

        def full() -> None:
            clock.offset += 60.0
            cache.refresh()
            assert cache.last_full

        walls, cpus = [], []
        for _ in range(5):
            wall, cpu = _timed_cpu(full)
            walls.append(wall)
            cpus.append(cpu)
        print(
            'full re-read, nothing changed: min %.0f ms, median %.0f ms '
            'wall; median %.0f ms CPU  (%d rows)'
            % (
                min(walls) * 1e3,
                statistics.median(walls) * 1e3,
                statistics.median(cpus) * 1e3,
                cache.last_rows,
            )
        )
        lagging = change('rack98', datetime.timedelta(minutes=5))
        cache.refresh()
        missed = seen(lagging, 'rack98')
        wall, cpu = _timed_cpu(full)
        print(
            'writer 5 min behind: fast refresh tags %s; full re-read '
            '%.0f ms wall, %.0f ms CPU, tags %s'
            % (missed, wall * 1e3, cpu * 1e3, seen(lagging, 'rack98'))
        )
        lookups = time.perf_counter()
        for u in uuids:
            cache.get(u)
        print(
            'lookup:                     %8.2f us each'
            % ((time.perf_counter() - lookups) / len(uuids) * 1e6)
        )
        cache.stop()
        engine.dispose()
    finally:
        with admin.connect() as connection:
            connection.execute(
                sa.text('DROP DATABASE IF EXISTS %s WITH (FORCE)' % name)
            )
        admin.dispose()
    return 0


if __name__ == '__main__':
    sys.exit(main())
