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
so each process keeps uuid -> tags in memory, refreshed by a background
thread in two ways:

* the fast path, every ``interval`` seconds: the rows created or saved
  since the start of the previous read, by ``created_at`` and
  ``updated_at``, reaching ``MARGIN`` further back because a writer
  stamps a row with its own clock, before it commits. Ironic has no
  index on those columns, so this is a sequential scan of the nodes
  table on the server (28 ms at 100,000 nodes) that returns only the
  changed rows;
* the full re-read, every ``rescan`` seconds by this process's own
  monotonic clock: uuid and extra of every node, applied as read, and
  nodes no longer listed forgotten.

The fast path trusts the writers' clocks; the full re-read trusts
nothing but the database's contents. So, whatever the clocks of the
hosts, a committed change of a node's tags, or its deletion, is in the
cache at most ``rescan`` seconds plus the time of one full read (and of
one fast read that may be running when the full one falls due) after
its commit, and usually within ``interval`` seconds. The bound holds
while the database answers; while it does not, the last tags read stay
in use, with one warning, and the first read after a failure longer
than ``rescan`` is a full one.

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

from collections.abc import Callable
from collections.abc import Iterator
from collections.abc import Sequence
import datetime
import json
import threading
import time
from typing import Any

from oslo_log import log
import sqlalchemy as sa

from ironic_affinity import exception
from ironic_affinity import outage
from ironic_affinity import tags
from ironic_affinity.integration import ironic_db

LOG = log.getLogger(__name__)

# How far back each fast read reaches before the start of the previous
# one: writers stamp updated_at from their own clock, before they commit,
# so a row can appear with a stamp somewhat in the past. A changed row is
# thus read a few times over this window; an unchanged one only by the
# full re-reads. A row stamped further back is left to the full re-read.
MARGIN = datetime.timedelta(seconds=30)

# Rows per fetch and per decoding batch. A green thread runs until it
# yields: one fetch of 100,000 rows and their JSON decoding held Ironic
# 29's conductors (heartbeat, RPC server, periodic tasks) for seconds.
# time.sleep(0) between batches yields under eventlet's patched time
# and only lets other threads run in a threaded process.
BATCH = 1000

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
    connection: sa.Connection, since: datetime.datetime | None
) -> Iterator[Sequence[sa.Row[Any]]]:
    """(uuid, extra) of the nodes, BATCH at a time, yielding between."""
    for batch in ironic_db.node_batches(
        connection, ('uuid', 'extra'), since, BATCH
    ):
        yield batch
        time.sleep(0)


def _reason(exc: Exception) -> str:
    """The error on one line, without the SQL SQLAlchemy appends."""
    driver_error = getattr(exc, 'orig', None)  # a DBAPIError's cause
    text = str(exc if driver_error is None else driver_error)
    return ' '.join(text.split()) or type(exc).__name__


class NodeTagCache:
    """uuid -> affinity tags for every node, refreshed in the background."""

    def __init__(
        self,
        database: ironic_db.IronicDatabase | str,
        key: str,
        interval: float,
        rescan: float,
        clock: Callable[[], float] = time.monotonic,
        utcnow: Callable[[], datetime.datetime] = ironic_db.utcnow,
    ) -> None:
        """:param database: Ironic's database, or its URL (the cache then
            has an engine of its own, closed by :meth:`stop`).
        :param interval: seconds between two fast reads.
        :param rescan: seconds between the starts of two full re-reads.
        :param clock: monotonic seconds, which schedule the full re-reads.
        :param utcnow: the wall clock in naive UTC, the fast path's
            reference against the rows' stamps.
        """
        self._owned = isinstance(database, str)
        self.database = (
            ironic_db.IronicDatabase(database)
            if isinstance(database, str)
            else database
        )
        self.key = key
        self.interval = interval
        self.rescan = rescan
        self._clock = clock
        self._utcnow = utcnow
        self._tags: dict[str, frozenset[str]] = {}
        # utcnow() at the start of the last successful read.
        self._since: datetime.datetime | None = None
        # clock() at the start of the last successful full read.
        self._last_full: float | None = None
        self._bad: dict[str, str] = {}
        self._interned: dict[frozenset[str], frozenset[str]] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._outage = outage.Outage(LOG, clock)
        #: Bumped whenever any node's tags change, for callers' caches.
        self.version = 0
        #: Rows read by the last refresh, for measurements.
        self.last_rows = 0
        #: Whether the last refresh was a full re-read.
        self.last_full = False
        #: Called after each successful refresh with its seconds, rows
        #: and whether it was a full re-read (metrics).
        self.observer: Callable[[float, int, bool], None] | None = None

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
        if self._owned:
            self.database.dispose()

    def get(self, uuid: str) -> frozenset[str] | None:
        """The node's tags, or None for a node not read yet."""
        return self._tags.get(uuid)

    def __len__(self) -> int:
        return len(self._tags)

    def full_due_in(self) -> float:
        """Seconds until the next full re-read is due; 0 if it is."""
        if self._last_full is None:
            return 0.0
        return max(0.0, self._last_full + self.rescan - self._clock())

    def _pause(self) -> float:
        if self._outage.failing:
            # A failed full read stays due: retry at the fast pace, not
            # in a loop against a database that is away.
            return self.interval
        # Woken for the full re-read when it falls due, not at the next
        # fast read after it: that keeps the bound at rescan, not rescan
        # plus interval.
        return min(self.interval, self.full_due_in())

    def _run(self) -> None:
        while not self._stop.wait(self._pause()):
            self.poll()

    def poll(self) -> None:
        """One refresh as the background thread makes it: a failure is
        logged (once per outage), not raised."""
        try:
            self.refresh()
        except Exception as exc:  # noqa: BLE001 - keep serving
            self._outage.failed(
                'Cannot read node affinity tags from the database '
                '(%(error)s); placing with the last known tags of '
                '%(count)d nodes until it answers again.',
                {'error': _reason(exc), 'count': len(self._tags)},
            )
        else:
            self._outage.recovered(
                'Node affinity tags readable again after %(seconds).0f s',
                {},
            )

    def refresh(self) -> None:
        """A full re-read if one is due (always the first time), else
        the rows changed since the previous read."""
        started = self._clock()
        stamp = self._utcnow()
        previous = self._since
        full = previous is None or self.full_due_in() <= 0
        since = None if full or previous is None else previous - MARGIN
        # Every tag set in use is interned again on a full read, so that
        # sets no node carries any more are let go.
        interned = {} if full else self._interned
        # Nothing is applied unless the whole read succeeds.
        rows: list[tuple[str, frozenset[str]]] = []
        with self.database.engine.connect() as connection:
            for batch in _batches(connection, since):
                rows.extend(
                    (uuid, self._parse(uuid, extra, interned))
                    for uuid, extra in batch
                )
        self._apply(rows, full)
        self._interned = interned
        self.last_rows = len(rows)
        self.last_full = full
        self._since = stamp
        seconds = self._clock() - started
        if full:
            self._last_full = started
            LOG.debug(
                'Read the affinity tags of all %(count)d nodes in '
                '%(seconds).3f s',
                {'count': len(rows), 'seconds': seconds},
            )
        if self.observer is not None:
            self.observer(seconds, len(rows), full)

    def _apply(
        self, rows: list[tuple[str, frozenset[str]]], full: bool
    ) -> None:
        changed = False
        with self._lock:
            for start in range(0, len(rows), BATCH):
                for uuid, node_tags in rows[start : start + BATCH]:
                    if self._tags.get(uuid) != node_tags:
                        self._tags[uuid] = node_tags
                        changed = True
                time.sleep(0)
            if full:
                listed = {uuid for uuid, _tags in rows}
                for gone in set(self._tags) - listed:
                    del self._tags[gone]
                    self._bad.pop(gone, None)
                    changed = True
            if changed:
                self.version += 1

    def _parse(
        self,
        uuid: str,
        extra: Any,
        interned: dict[frozenset[str], frozenset[str]],
    ) -> frozenset[str]:
        try:
            node_tags = tags_from_extra(extra, self.key, uuid)
        except (exception.InvalidTag, ValueError) as exc:
            # Once per node and value: the node's row is read again by
            # every full re-read, and by fast reads within the margin.
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
        return interned.setdefault(node_tags, node_tags)
