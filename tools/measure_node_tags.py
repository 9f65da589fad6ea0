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
(ironic-dbsync), inserts N nodes with affinity tags in ``extra``, starts
a Redis server of its own, and times two caches of one deployment: the
holder of the reader's lock, which reads the table and publishes, and a
follower, which reads what it published. For each: the first read (the
holder's full read and publication; the follower's read of every
bucket), an idle refresh, a refresh after 100 nodes changed through the
API (their change notices), the holder's periodic full read, and the
takeover after the holder stops; rows read, buckets read, backend calls,
wall and CPU time, the memory the cache holds, and a lookup. The
database is dropped at the end.

Needs Ironic and redis-server installed (tox -e e2e has the former)::

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

from ironic_affinity.integration.data import ironic_db
from ironic_affinity.integration.node_tags import change_notices
from ironic_affinity.integration.node_tags import tag_board
from ironic_affinity.integration.node_tags import tag_cache
from ironic_affinity.tests.functional import servers

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


API_GROUP = 'measure.api'


def _cache(url: str, backend: str, name: str, clock: _Clock):  # type: ignore[no-untyped-def]
    database = ironic_db.IronicDatabase(url)
    return tag_cache.NodeTagCache(
        database,
        tag_board.TagBoard(backend, 'measure', name, 5),
        'affinity_tags',
        2.0,
        60.0,
        API_GROUP,
        clock=clock,
    )


def _measure(args, url, engine, uuids, rng, backend) -> None:  # type: ignore[no-untyped-def]
    clock = _Clock()
    rss_before = _rss_mib()
    holder = _cache(url, backend, 'holder', clock)
    first = _timed_cpu(holder.poll)
    assert holder.leading
    print(
        'holder, first full read and publication: %7.0f ms wall, %5.0f ms '
        'CPU (%d rows; %d backend calls)'
        % (first[0] * 1e3, first[1] * 1e3, holder.last_rows,
           holder.board.calls)
    )  # fmt: skip
    print(
        'cache memory (max RSS growth of this process): %5.1f MiB'
        % (_rss_mib() - rss_before)
    )
    follower = _cache(url, backend, 'follower', clock)
    warm = _timed_cpu(follower.poll)
    print(
        'follower, first read of every bucket:    %7.0f ms wall, %5.0f ms '
        'CPU (%d rows; %d buckets; %d backend calls; %d nodes)'
        % (warm[0] * 1e3, warm[1] * 1e3, follower.last_rows,
           follower.buckets_read, follower.board.calls, len(follower))
    )  # fmt: skip
    calls = (holder.board.calls, follower.board.calls)
    idle_holder = min(_timed(holder.poll) for _ in range(5))
    buckets = follower.buckets_read
    idle_follower = min(_timed(follower.poll) for _ in range(5))
    print(
        'idle refresh: holder %.1f ms (%d rows; %.1f backend calls each), '
        'follower %.1f ms (%d rows; %d buckets; %.1f backend calls each)'
        % (idle_holder * 1e3, holder.last_rows,
           (holder.board.calls - calls[0]) / 5, idle_follower * 1e3,
           follower.last_rows, follower.buckets_read - buckets,
           (follower.board.calls - calls[1]) / 5)
    )  # fmt: skip

    # 100 nodes changed through the API: their notices, as the middleware
    # publishes them in one API process's entry.
    picked = rng.sample(uuids, 100)
    with engine.begin() as connection:
        connection.execute(
            sa.text("UPDATE nodes SET extra = :extra WHERE uuid = ANY(:u)"),
            {'extra': json.dumps({'affinity_tags': 'rack99'}), 'u': picked},
        )
    notices = change_notices.ChangeNotices()
    api = tag_board.TagBoard(backend, 'measure', 'api', 5)
    api_client = api._started()  # a client of the API process's own
    api_client.create_group(API_GROUP.encode()).get()
    for start in range(0, len(picked), change_notices.KEPT):
        for u in picked[start : start + change_notices.KEPT]:
            notices.record(u)
        caps = notices.capabilities()
        if start == 0:
            api_client.join_group(API_GROUP.encode(), caps).get()
        else:
            api_client.update_capabilities(API_GROUP.encode(), caps).get()
        busy = _timed_cpu(holder.poll)
        buckets = follower.buckets_read
        seen = _timed_cpu(follower.poll)
        print(
            'after %d notices: holder %.1f ms (%d rows), follower %.1f ms '
            '(%d buckets)'
            % (len(picked[start : start + change_notices.KEPT]),
               busy[0] * 1e3, holder.last_rows, seen[0] * 1e3,
               follower.buckets_read - buckets)
        )  # fmt: skip
    updated = all(follower.get(u) == frozenset({'rack99'}) for u in picked)
    print('follower has the 100 changes: %s' % updated)

    def full() -> None:
        clock.offset += 60.0
        holder.poll()
        assert holder.last_full

    walls, cpus = [], []
    for _ in range(5):
        wall, cpu = _timed_cpu(full)
        walls.append(wall)
        cpus.append(cpu)
    print(
        'holder full re-read, nothing changed: min %.0f ms, median %.0f ms '
        'wall; median %.0f ms CPU (%d rows)'
        % (min(walls) * 1e3, statistics.median(walls) * 1e3,
           statistics.median(cpus) * 1e3, holder.last_rows)
    )  # fmt: skip
    holder.stop()
    buckets = follower.buckets_read
    takeover = _timed_cpu(follower.poll)
    print(
        'takeover after a clean stop: %.0f ms wall, %.0f ms CPU (leading '
        '%s; %d rows; %d buckets read again)'
        % (takeover[0] * 1e3, takeover[1] * 1e3, follower.leading,
           follower.last_rows, follower.buckets_read - buckets)
    )  # fmt: skip
    lookups = time.perf_counter()
    for u in uuids:
        follower.get(u)
    print(
        'lookup: %.2f us each'
        % ((time.perf_counter() - lookups) / len(uuids) * 1e6)
    )
    follower.stop()
    api.stop()


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

        redis = servers.RedisServer()
        redis.setUp()
        try:
            _measure(args, url, engine, uuids, rng, redis.url)
        finally:
            redis.cleanUp()
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
