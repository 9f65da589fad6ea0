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

"""Every node's affinity tags, kept fresh from Ironic's database.

Ironic asks for a node's conductor by uuid alone, many times a second,
so each process keeps uuid -> tags in memory. A background thread reads
only the rows changed since its last read (Ironic stamps updated_at on
every save), with a margin for clocks and commit order, and re-lists all
uuids now and then to forget deleted nodes. At 100,000 nodes a change
costs one indexed query returning the changed rows, not a full read.

Rows come in batches from a server-side cursor, and the reading thread
gives up the interpreter between batches (see ``BATCH``), so that a read
of every node never holds a conductor still: under Ironic 29, which
monkey-patches eventlet, this thread is a green thread of the conductor's
one event loop, and psycopg2 blocks that loop for as long as a fetch
lasts.

Tags live in the node's ``extra`` field under a configurable key, as a
list or a comma/space separated string. A value outside the tag grammar
(written before the plugin checked values at the API) is read as no tags,
with one warning naming the node, so the node is still placed.
"""

from collections.abc import Iterator
import datetime
import json
import threading
import time
from typing import Any

from oslo_log import log
import sqlalchemy as sa

from ironic_affinity import exception
from ironic_affinity import tags

LOG = log.getLogger(__name__)

# How far back each incremental read reaches before the start of the last
# one: writers stamp updated_at from their own clock, before they commit,
# so a row can appear with a stamp somewhat in the past. A changed row is
# thus read a few times over this window; an unchanged one never again.
MARGIN = datetime.timedelta(seconds=30)

# Rows per fetch and per decoding batch. A green thread runs until it
# yields: one fetch of 100,000 rows and their JSON decoding held Ironic
# 29's conductors (heartbeat, RPC server, periodic tasks) for seconds.
# time.sleep(0) between batches yields under eventlet's patched time
# and only lets other threads run in a threaded process.
BATCH = 1000

METADATA = sa.MetaData()
# Ironic's nodes table, only the columns this project reads (here and in
# the live commands); Ironic owns the schema.
NODES = sa.Table(
    'nodes',
    METADATA,
    sa.Column('uuid', sa.String(36)),
    sa.Column('name', sa.String(255)),
    sa.Column('driver', sa.String(255)),
    sa.Column('conductor_group', sa.String(255)),
    sa.Column('extra', sa.Text),
    sa.Column('created_at', sa.DateTime),
    sa.Column('updated_at', sa.DateTime),
)

NO_TAGS: frozenset[str] = frozenset()


def tags_from_extra(extra: Any, key: str, node: str) -> frozenset[str]:
    """The affinity tags in a node's ``extra`` (a dict or its JSON text).

    :raises: InvalidTag naming the node and key for a bad value.
    """
    if isinstance(extra, str):
        extra = json.loads(extra) if extra else {}
    if not isinstance(extra, dict):
        return NO_TAGS
    return tags.parse_tags(extra.get(key), 'node %s extra.%s' % (node, key))


def _batches(
    connection: sa.Connection, query: sa.Select[Any]
) -> Iterator[Any]:
    """The query's rows, BATCH at a time, yielding between batches."""
    result = connection.execution_options(yield_per=BATCH).execute(query)
    for batch in result.partitions():
        yield batch
        time.sleep(0)


class NodeTagCache:
    """uuid -> affinity tags for every node, refreshed in the background."""

    def __init__(
        self, connection: str, key: str, interval: float, rescan: float
    ) -> None:
        self.key = key
        self.interval = interval
        self.rescan = rescan
        self._engine = sa.create_engine(
            connection, pool_size=1, max_overflow=1, pool_pre_ping=True
        )
        self._tags: dict[str, frozenset[str]] = {}
        self._since: datetime.datetime | None = None
        self._last_scan = 0.0
        self._bad: dict[str, str] = {}
        self._interned: dict[frozenset[str], frozenset[str]] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._failing = False
        #: Bumped whenever any node's tags change, for callers' caches.
        self.version = 0
        #: Rows read by the last refresh, for measurements.
        self.last_rows = 0

    def start(self) -> None:
        self.refresh()
        self._thread = threading.Thread(
            target=self._run, name='affinity-node-tags', daemon=True
        )
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(10)
        self._engine.dispose()

    def get(self, uuid: str) -> frozenset[str] | None:
        """The node's tags, or None for a node not read yet."""
        return self._tags.get(uuid)

    def __len__(self) -> int:
        return len(self._tags)

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                self.refresh()
            except Exception as exc:  # noqa: BLE001 - keep serving
                if not self._failing:
                    LOG.warning(
                        'Cannot read node affinity tags from the database '
                        '(%(error)s); placing with the last known tags of '
                        '%(count)d nodes until it answers again.',
                        {'error': exc, 'count': len(self._tags)},
                    )
                self._failing = True
            else:
                if self._failing:
                    LOG.info('Node affinity tags readable again')
                self._failing = False

    def refresh(self) -> None:
        """Read what changed since the last refresh (all, the first time)."""
        now = time.monotonic()
        started = datetime.datetime.now(datetime.timezone.utc).replace(
            tzinfo=None
        )
        full = self._since is None or now - self._last_scan >= self.rescan
        query = sa.select(NODES.c.uuid, NODES.c.extra)
        if self._since is not None:
            since = self._since - MARGIN
            query = query.where(
                sa.or_(
                    NODES.c.updated_at >= since, NODES.c.created_at >= since
                )
            )
        # Nothing is applied unless the whole read succeeds.
        updates: list[tuple[str, frozenset[str]]] = []
        uuids: set[str] | None = None
        with self._engine.connect() as connection:
            for batch in _batches(connection, query):
                updates.extend(
                    (uuid, self._parse(uuid, extra)) for uuid, extra in batch
                )
            if full and self._since is not None:
                uuids = set()
                for batch in _batches(connection, sa.select(NODES.c.uuid)):
                    uuids.update(row[0] for row in batch)
        self.last_rows = len(updates)
        changed = False
        with self._lock:
            for start in range(0, len(updates), BATCH):
                for uuid, node_tags in updates[start : start + BATCH]:
                    if self._tags.get(uuid) != node_tags:
                        self._tags[uuid] = node_tags
                        changed = True
                time.sleep(0)
            if uuids is not None:
                for gone in set(self._tags) - uuids:
                    del self._tags[gone]
                    self._bad.pop(gone, None)
                    changed = True
            if changed:
                self.version += 1
        self._since = started
        if full:
            self._last_scan = now

    def _parse(self, uuid: str, extra: Any) -> frozenset[str]:
        try:
            node_tags = tags_from_extra(extra, self.key, uuid)
        except (exception.InvalidTag, ValueError) as exc:
            if self._bad.get(uuid) != str(exc):
                LOG.warning(
                    'Node %(node)s has unusable affinity tags and is placed '
                    'as untagged until they are fixed: %(error)s',
                    {'node': uuid, 'error': exc},
                )
            self._bad[uuid] = str(exc)
            return NO_TAGS
        self._bad.pop(uuid, None)
        # Nodes share a few hundred tag sets: keep one copy of each.
        return self._interned.setdefault(node_tags, node_tags)
