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

"""The node tag cache: the one object the rest of the plugin holds.

It runs the refreshes in a thread, takes a role at each (the reader
while it holds the lock, else a follower; it reads every node itself
only when it has no tags and nobody has published any), keeps serving
through either side's outage, and answers lookups, reading the row of a
node that is not published yet. The whole path, and how fresh the tags
are: :mod:`ironic_affinity.integration.node_tags`.
"""

from collections.abc import Callable
import threading
import time

from oslo_log import log
import sqlalchemy as sa

from ironic_affinity import outage
from ironic_affinity.integration.data import ironic_db
from ironic_affinity.integration.node_tags import fresh_nodes
from ironic_affinity.integration.node_tags import node_facts
from ironic_affinity.integration.node_tags import tag_board
from ironic_affinity.integration.node_tags import tag_follower
from ironic_affinity.integration.node_tags import tag_reader

LOG = log.getLogger(__name__)


class NodeTagCache:
    """uuid -> affinity tags for every node, refreshed in the background
    from the coordination backend, or from the database by the holder of
    the reader's lock (see the module's docstring)."""

    def __init__(
        self,
        database: ironic_db.IronicDatabase,
        board: tag_board.TagBoard,
        key: str,
        interval: float,
        rescan: float,
        api_group: str,
        warm_timeout: float = 10.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """:param board: the published tags on the coordination backend.
        :param interval: seconds between two refreshes.
        :param rescan: seconds between the starts of two full reads of
            the nodes table by the holder of the lock.
        :param api_group: the group whose entries carry the API
            processes' change notices.
        :param warm_timeout: seconds :meth:`start` waits for the backend
            before it reads the database itself.
        :param clock: monotonic seconds, which schedule the full reads.
        """
        self.database = database
        self.board = board
        self.interval = interval
        self.warm_timeout = warm_timeout
        self._clock = clock
        self._follower = tag_follower.TagFollower(board)
        self._reader = tag_reader.TagReader(
            database,
            board,
            self._follower,
            node_facts.RowEncoder(key),
            rescan,
            api_group,
            clock,
        )
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._backend_outage = outage.Outage(LOG, clock)
        self._database_outage = outage.Outage(LOG, clock)
        #: Set once every node's tags have been read at least once.
        self.loaded = self._follower.loaded
        #: Called after each successful refresh with its seconds, the
        #: nodes held and whether it read every row (metrics).
        self.observer: Callable[[float, int, bool], None] | None = None
        #: Nodes read by this process ahead of what is published: see
        #: :meth:`lookup`. Kept until published, or for as long as a
        #: change takes to reach every process (two intervals) and one
        #: more.
        self.fresh = fresh_nodes.FreshNodes(
            self._read_one, lambda: 3 * self.interval, clock=clock
        )

    @property
    def leading(self) -> bool:
        """Whether this process is the one that reads the nodes table."""
        return self.board.leading

    @property
    def version(self) -> int:
        """Bumped whenever any node's tags change, for callers' caches."""
        return self._follower.version

    @version.setter
    def version(self, value: int) -> None:
        self._follower.version = value

    @property
    def last_rows(self) -> int:
        """Rows read from the nodes table by the last refresh."""
        return self._reader.last_rows

    @property
    def last_full(self) -> bool:
        """Whether the last refresh read every row of it."""
        return self._reader.last_full

    @property
    def buckets_read(self) -> int:
        """Buckets read from the backend since start, for measurements."""
        return self._follower.buckets_read

    def start(self) -> None:
        """Start refreshing, and return once every node's tags are read.

        From the backend if it answers within ``warm_timeout``, else from
        the database: a process's first lookups (a conductor's first
        power sync, the API's first request) find them in memory.
        """
        started = self._clock()
        self._thread = threading.Thread(
            target=self._run, name='affinity-node-tags', daemon=True
        )
        self._thread.start()
        if self.loaded.wait(self.warm_timeout):
            LOG.info(
                'Affinity tags of %(count)d nodes read %(seconds).2f s after '
                'start, %(how)s',
                {
                    'count': len(self),
                    'seconds': self._clock() - started,
                    'how': self._follower.source,
                },
            )
            return
        LOG.warning(
            'Node affinity tags not read from the coordination backend '
            'within %(timeout)s s of start; reading them from the '
            'database',
            {'timeout': self.warm_timeout},
        )
        try:
            self._follower.install_all(self._reader.read_all())
        except sa.exc.SQLAlchemyError as exc:
            LOG.error(
                'Cannot read node affinity tags from the database '
                'either (%(error)s): nodes are placed as not yet '
                'known until one of them answers',
                {'error': ironic_db.error_text(exc)},
            )

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(10)
        # Leaving releases the lock at once: another process takes over
        # without waiting for it to expire.
        self.board.stop()

    def get(self, uuid: str) -> frozenset[str] | None:
        """The node's tags, or None for a node not read yet."""
        found = self.facts(uuid)
        return None if found is None else found.tags

    def facts(self, uuid: str) -> node_facts.NodeFacts | None:
        """All that is held of the node, or None for a node not read yet;
        what this process read itself wins over what was published until
        the publication catches up (see :meth:`lookup`)."""
        held = self._follower.held(uuid)
        if self.fresh:
            return self.fresh.held(uuid, held)  # type: ignore[no-any-return]
        return held

    def lookup(self, uuid: str) -> frozenset[str] | None:
        """The node's tags, read from its row first if they are not held.

        This is what placement asks: no node is placed without the tags
        that are in the database, even in the seconds before the node
        is published. None for a node that is not in the database (a
        creation routed before its row exists); tags of the type
        :class:`~ironic_affinity.integration.node_tags.fresh_nodes.BeingCreated`
        for the node this thread is creating.

        :raises: NodeTagsUnreadable when the row must be read and cannot.
        """
        found = self.fresh.lookup(uuid, self._follower.held(uuid))
        return None if found is None else found.tags

    def created_at(self, uuid: str) -> float | None:
        """When the node was created, as held (after :meth:`lookup`);
        None when not known."""
        found = self.facts(uuid)
        if found is None or found.created_at is None:
            return None
        return float(found.created_at)

    def written(self, uuid: str) -> None:
        """This process has just created or updated the node through
        Ironic's API: place it by what its row holds now."""
        self.fresh.written(uuid)

    def _read_one(self, uuid: str) -> node_facts.NodeFacts | None:
        """The facts in one node's row, by uuid; None without one."""
        text = self._reader.read_row(uuid)
        return None if text is None else self._follower.decoder.decode(text)

    def nodes(self) -> list[tuple[str, node_facts.NodeFacts]]:
        """(uuid, facts) of every node held, for the placement metrics."""
        return self._follower.nodes()

    def __len__(self) -> int:
        return len(self._follower)

    def full_due_in(self) -> float:
        """Seconds until the holder's next full read is due; 0 if it is."""
        return self._reader.full_due_in()

    def _pause(self) -> float:
        if not self.leading or self._database_outage.failing:
            return self.interval
        # Woken for the full read when it falls due, not at the refresh
        # after it: that keeps the bound at rescan, not rescan plus
        # interval.
        return min(self.interval, self.full_due_in())

    def _run(self) -> None:
        self.poll()
        while not self._stop.wait(self._pause()):
            self.poll()

    def poll(self) -> None:
        """One refresh as the background thread makes it: a failure is
        logged (once per outage), not raised."""
        started = self._clock()
        self._reader.new_refresh()
        try:
            if self.board.try_lead():
                self._reader.lead(started)
            else:
                self._follow()
        except sa.exc.SQLAlchemyError as exc:
            # Only the holder reads the database: it keeps the lock and,
            # once the database answers, reads every node, since the
            # notices it had taken may not have been read.
            self._reader.database_failed()
            self._database_outage.failed(
                'Cannot read node affinity tags from the database '
                '(%(error)s); placing with the last known tags of '
                '%(count)d nodes until it answers again.',
                {'error': ironic_db.error_text(exc), 'count': len(self)},
            )
            return
        except tag_board.LockLost:
            # Stalled past the member timeout mid-publication: another
            # process may hold the lock and read the table now.
            self._reader.step_down()
            LOG.warning(
                'Lost the lock of the node affinity tags reader while '
                'publishing (a stall longer than [affinity]member_timeout'
                '); another process takes over the reading'
            )
            return
        except Exception as exc:  # noqa: BLE001 - keep serving
            self.board.discard()
            self._reader.step_down()
            self._backend_outage.failed(
                'Cannot read node affinity tags from the coordination '
                'backend (%(error)s); placing with the last known tags of '
                '%(count)d nodes until it answers again.',
                {
                    'error': self.board.describe(exc),
                    'count': len(self),
                },
            )
            return
        self.fresh.prune(self._follower.held)
        self._backend_outage.recovered(
            'Node affinity tags readable from the coordination backend '
            'again after %(seconds).0f s',
            {},
        )
        self._database_outage.recovered(
            'Node affinity tags readable from the database again after '
            '%(seconds).0f s',
            {},
        )
        if self.observer is not None:
            self.observer(self._clock() - started, len(self), self.last_full)

    def _follow(self) -> None:
        self._reader.step_down()
        # No row of the nodes table, but one statement: so that this
        # process sees a database outage when it makes no lookup meanwhile
        # (the active conductors' source reads failed_at).
        self.database.probe()
        if not self._follower.follow() and not self.loaded.is_set():
            # Nobody has published yet: the first processes of a
            # deployment start together. Read once for ourselves.
            self._follower.install_all(self._reader.read_all())
