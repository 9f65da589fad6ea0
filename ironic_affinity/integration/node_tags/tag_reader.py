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

"""Ironic's nodes table, read for the whole deployment by one process.

The holder of the reader's lock reads every node when it takes the lock
and then every ``rescan`` seconds, and in between only the nodes that
API processes noted as written (:mod:`.change_notices`), by Ironic's
unique uuid and name indexes. It installs what it reads in its own
memory (:mod:`.tag_follower`) and publishes the buckets that changed. So the
database sees one reader, whatever the number of processes.

A process that takes the lock over carries on from the publication it
last followed rather than reading every node again (see
:meth:`TagReader._adopted`). Any process may read rows for itself: every
node when nobody publishes, one row for a lookup of a node not held.

Rows come in batches from a server-side cursor, and the reading thread
gives up the interpreter between batches (see ``BATCH``), so that a read
of every node never holds a conductor still: under Ironic 29, which
monkey-patches eventlet, this thread is a green thread of the conductor's
one event loop, and psycopg2 blocks that loop for as long as a fetch
lasts.
"""

from collections.abc import Callable
from collections.abc import Iterator
from collections.abc import Sequence
import time
from typing import Any

from oslo_log import log
import sqlalchemy as sa

from ironic_affinity.integration.data import ironic_db
from ironic_affinity.integration.node_tags import board_format
from ironic_affinity.integration.node_tags import change_notices
from ironic_affinity.integration.node_tags import node_facts
from ironic_affinity.integration.node_tags import tag_board
from ironic_affinity.integration.node_tags import tag_follower

LOG = log.getLogger(__name__)

# Rows per fetch and per decoding batch. A green thread runs until it
# yields: one fetch of 100,000 rows and their JSON decoding held Ironic
# 29's conductors (heartbeat, RPC server, periodic tasks) for seconds.
# time.sleep(0) between batches yields under eventlet's patched time
# and only lets other threads run in a threaded process.
BATCH = 1000


def _batches(connection: sa.Connection) -> Iterator[Sequence[sa.Row[Any]]]:
    """The :data:`~node_facts.COLUMNS` of every node, BATCH at a time,
    yielding between."""
    for batch in ironic_db.node_batches(
        connection, node_facts.COLUMNS, None, BATCH
    ):
        yield batch
        time.sleep(0)


class TagReader:
    """Reads nodes' rows as published text; while this process holds the
    lock, reads them for the deployment and publishes them."""

    def __init__(
        self,
        database: ironic_db.IronicDatabase,
        board: tag_board.TagBoard,
        memory: tag_follower.TagFollower,
        encoder: node_facts.RowEncoder,
        rescan: float,
        api_group: str,
        clock: Callable[[], float],
    ) -> None:
        """:param memory: where this process holds what it reads.
        :param rescan: seconds between the starts of two full reads of
            the nodes table by the holder of the lock.
        :param api_group: the group whose entries carry the API
            processes' change notices.
        :param clock: monotonic seconds, which schedule the full reads.
        """
        self.database = database
        self.board = board
        self.memory = memory
        self.encoder = encoder
        self.rescan = rescan
        self.api_group = api_group.encode('utf-8')
        self._clock = clock
        # The buckets as published (tags as canonical text); None while
        # this process does not hold the lock.
        self._published: list[board_format.Bucket] | None = None
        self._last_full: float | None = None
        self._notices = change_notices.NoticeTracker()
        #: Rows read from the nodes table by the last refresh.
        self.last_rows = 0
        #: Whether the last refresh read every row of it.
        self.last_full = False

    def new_refresh(self) -> None:
        """Count the rows of one more refresh, none so far."""
        self.last_rows = 0
        self.last_full = False

    def step_down(self) -> None:
        """Publish nothing more from what was published: whoever leads
        next, this process included, adopts or reads it again."""
        self._published = None

    def database_failed(self) -> None:
        """Read every node once the database answers again: the notices
        taken meanwhile may not have been read."""
        self._last_full = None

    def full_due_in(self) -> float:
        """Seconds until the holder's next full read is due; 0 if it is."""
        if self._last_full is None:
            return 0.0
        return max(0.0, self._last_full + self.rescan - self._clock())

    def lead(self, started: float) -> None:
        """One refresh as the holder of the lock, begun at ``started``.

        :raises: SQLAlchemyError, LockLost, tooz errors.
        """
        entries = self.board.read_entries(self.api_group)
        took_over = self._published is None
        if took_over:
            self._published = self._adopted()
        idents, missed = self._notices.new(entries)
        published = self._published
        if published is None or missed or self.full_due_in() <= 0:
            fresh = self.read_all()
            self._notices.prime(entries)
            self._last_full = started
            changed = {
                number: bucket
                for number, bucket in enumerate(fresh)
                if published is None or bucket != published[number]
            }
            self._published = fresh
        elif idents:
            changed = self._read_changes(published, idents)
        else:
            changed = {}
            self.database.probe()  # as a follower does: see NodeTagCache
        if took_over and self._published is not None:
            # Readers take buckets from the index's publisher, ours now:
            # every bucket goes out under our name.
            changed = dict(enumerate(self._published))
        for number, bucket in changed.items():
            self.memory.install(number, bucket)
        if changed:
            # Digests as installed: what readers compute of the same.
            self.board.publish(
                changed,
                self.memory.digests(),
                full_age=self._clock()
                - (started if self._last_full is None else self._last_full),
                notices_seen=self._notices.seen,
            )
        if took_over:
            LOG.info(
                'This process now reads node affinity tags from the '
                'database for the whole deployment, and publishes them '
                'on the coordination backend (%(how)s)',
                {
                    'how': 'carrying on from the previous reader\'s '
                    'publication; next full read in %.0f s'
                    % self.full_due_in()
                    if not self.last_full
                    else 'after a read of every node'
                },
            )
        self.memory.loaded_from('from the database, for the whole deployment')

    def _adopted(self) -> list[board_format.Bucket] | None:
        """On taking the lock: what the previous holder published, as
        this process last read it whole, so that it carries on from there
        (its notices and the time of its last full read) rather than
        reading every node again; None when it cannot.

        Without this, a lock that changes hands on an overloaded host
        (a holder stalled past the timeout) costs a read of the whole
        table each time. From memory, not from the backend: the old
        holder's entries expire with its lock. What it did after that
        read is done again: its later notices are read again, and the
        next full read comes no later than its own would have.
        """
        index = self.memory.take_followed()
        if (
            index is None
            or index.full_at is None
            or index.notices_seen is None
            or tuple(self.memory.digests()) != index.digests
        ):
            return None
        age = self.board.seconds_since(index.full_at)
        if age >= self.rescan:
            return None  # a full read is due anyway
        buckets = self.memory.as_published()
        # What we hold is what was published, to the byte.
        if any(
            board_format.digest(bucket) != wanted
            for bucket, wanted in zip(buckets, index.digests, strict=True)
        ):
            return None
        self._notices.adopt(index.notices_seen)
        self._last_full = self._clock() - age
        return buckets

    def _read_changes(
        self, published: list[board_format.Bucket], idents: set[str]
    ) -> dict[int, board_format.Bucket]:
        """The buckets that the noted nodes change, read by index."""
        with self.database.engine.connect() as connection:
            rows = ironic_db.nodes_by_ident(
                connection, sorted(idents), node_facts.COLUMNS
            )
        self.last_rows = len(rows)
        changed: dict[int, board_format.Bucket] = {}

        def bucket(uuid: str) -> board_format.Bucket:
            number = board_format.bucket_of(uuid)
            if number not in changed:
                changed[number] = dict(published[number])
            return changed[number]

        found = set()
        for uuid, *values in rows:
            found.add(uuid)
            bucket(uuid)[uuid] = self.encoder.encode(uuid, *values)
        for ident in idents:
            # A uuid noted but not found: the node was deleted.
            if node_facts.is_uuid(ident) and ident not in found:
                bucket(ident).pop(ident, None)
        for number in list(changed):
            if changed[number] == published[number]:
                del changed[number]
            else:
                published[number] = changed[number]
        return changed

    def read_all(self) -> list[board_format.Bucket]:
        """Every node as published, in its bucket."""
        interned: dict[str, str] = {}
        buckets: list[board_format.Bucket] = [
            {} for _ in range(board_format.BUCKETS)
        ]
        count = 0
        with self.database.engine.connect() as connection:
            for batch in _batches(connection):
                # A read of every node can outlast the lock on a busy host.
                self.board.keep_leading()
                for uuid, *values in batch:
                    text = self.encoder.encode(uuid, *values)
                    number = board_format.bucket_of(uuid)
                    buckets[number][uuid] = interned.setdefault(text, text)
                    count += 1
        self.last_rows = count
        self.last_full = True
        LOG.debug(
            'Read the affinity tags of all %(count)d nodes',
            {'count': count},
        )
        return buckets

    def read_row(self, uuid: str) -> str | None:
        """One node's row as published, by uuid, for a lookup: without a
        warning of its own (see :meth:`RowEncoder.encode`); None without
        a row."""
        with self.database.engine.connect() as connection:
            rows = ironic_db.nodes_by_uuid(
                connection, uuid, node_facts.COLUMNS
            )
        if not rows:
            return None
        found_uuid, extra, driver, group, created_at = rows[0]
        return self.encoder.encode(
            found_uuid, extra, driver, group, created_at, warn=False
        )
