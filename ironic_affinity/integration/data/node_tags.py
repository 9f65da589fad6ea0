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

"""Every node's affinity tags, read from Ironic's database by one process.

Ironic asks for a node's conductor by uuid alone, many times a second,
so each process keeps uuid -> tags in memory. Who reads what:

* one process of the deployment at a time, the holder of a tooz lock on
  the coordination backend (:mod:`ironic_affinity.membership.tag_board`),
  reads the nodes table: every node when it takes the lock and then
  every ``rescan`` seconds, and in between only the nodes that API
  processes noted as written (:mod:`ironic_affinity.membership.
  change_notices`), by Ironic's unique uuid and name indexes. It
  publishes each node's tags, in buckets, through the backend;
* every other process reads the backend's index every ``interval``
  seconds and only the buckets that changed. It never reads the nodes
  table, but when it has no tags at all and nobody has published any
  (the first processes of a deployment, or a backend that is down when
  the process starts): then it reads every node once itself.

So the database sees one reader, whatever the number of processes, and
an idle deployment's refreshes read no rows but the full re-read. A
change written through Ironic's API reaches every process within about
two ``interval`` (the writer's notice, the holder's read, the others'
read of the index); any other committed change (inspection rules in a
conductor, a direct edit of the database) within ``rescan`` plus one
full read plus one ``interval``, whatever the clocks of the hosts. When
the holder dies, another process takes the lock within the member
timeout and reads every node. While the backend does not answer, a
process keeps the tags it has, with one warning, and catches up when it
answers again; the database's outages are the holder's alone to see.

Rows come in batches from a server-side cursor, and the reading thread
gives up the interpreter between batches (see ``BATCH``), so that a read
of every node never holds a conductor still: under Ironic 29, which
monkey-patches eventlet, this thread is a green thread of the conductor's
one event loop, and psycopg2 blocks that loop for as long as a fetch
lasts.

What is published of a node is its hardware type and conductor group
beside its tags (:class:`NodeFacts`): the ring needs only the tags, but
the placement metrics place every node, which they can then do from
memory, rather than each reporting process reading the table.

Tags live in the node's ``extra`` field under a configurable key, as a
list or a comma/space separated string. A value outside the tag grammar
(written before the plugin checked values at the API) is published as no
tags, with one warning naming the node by the process that read it, so
the node is still placed.
"""

from collections.abc import Callable
from collections.abc import Iterable
from collections.abc import Iterator
from collections.abc import Sequence
import dataclasses
import json
import threading
import time
from typing import Any
import uuid as uuidlib

from oslo_log import log
import sqlalchemy as sa

from ironic_affinity import exception
from ironic_affinity import outage
from ironic_affinity import profile
from ironic_affinity import tags
from ironic_affinity.integration.data import fresh_nodes
from ironic_affinity.integration.data import ironic_db
from ironic_affinity.membership import change_notices
from ironic_affinity.membership import tag_board

LOG = log.getLogger(__name__)

BUCKETS = tag_board.BUCKETS

# Rows per fetch and per decoding batch. A green thread runs until it
# yields: one fetch of 100,000 rows and their JSON decoding held Ironic
# 29's conductors (heartbeat, RPC server, periodic tasks) for seconds.
# time.sleep(0) between batches yields under eventlet's patched time
# and only lets other threads run in a threaded process.
BATCH = 1000

NO_TAGS: frozenset[str] = frozenset()
# The columns read of each node.
COLUMNS = ('uuid', 'extra', 'driver', 'conductor_group')
# Between the parts of a node's published text: in none of them (tags,
# driver names and conductor groups are words of letters, digits, dots,
# dashes and underscores).
SEPARATOR = '\n'


@dataclasses.dataclass(frozen=True)
class NodeFacts:
    """What is published of one node; one object per distinct value,
    shared by the nodes that have it."""

    driver: str
    conductor_group: str
    tags: frozenset[str]


NO_FACTS = NodeFacts('', '', NO_TAGS)


def requests(
    nodes: Iterable[tuple[str, NodeFacts]], use_groups: bool = True
) -> list[profile.NodeRequest]:
    """(uuid, facts) as held here, as the engine takes them: named by
    uuid, as the ring looks nodes up; without groups (Ironic's rings
    built with ``use_groups=False``) every node is in group ''."""
    return [
        profile.NodeRequest(
            name=uuid,
            tags=facts.tags,
            uuid=uuid,
            driver=facts.driver or None,
            conductor_group=facts.conductor_group if use_groups else '',
        )
        for uuid, facts in nodes
    ]


def tags_from_extra(extra: Any, key: str, node: str) -> frozenset[str]:
    """The affinity tags in a node's ``extra`` (a dict or its JSON text).

    :raises: InvalidTag naming the node and key for a bad value.
    """
    if isinstance(extra, str):
        extra = json.loads(extra) if extra else {}
    if not isinstance(extra, dict):
        return NO_TAGS
    return tags.parse_tags(extra.get(key), 'node %s extra.%s' % (node, key))


def _batches(connection: sa.Connection) -> Iterator[Sequence[sa.Row[Any]]]:
    """:data:`COLUMNS` of every node, BATCH at a time, yielding between."""
    for batch in ironic_db.node_batches(connection, COLUMNS, None, BATCH):
        yield batch
        time.sleep(0)


def _bucketed(rows: Iterable[tuple[str, str]]) -> list[tag_board.Bucket]:
    """(uuid, tags as text) rows split into the published buckets."""
    buckets: list[tag_board.Bucket] = [{} for _ in range(BUCKETS)]
    for uuid, text in rows:
        buckets[tag_board.bucket_of(uuid)][uuid] = text
    return buckets


def _text(driver: str, group: str, tag_text: str) -> str:
    """A node as published: hardware type, conductor group (in lower
    case, as Ironic matches it) and tags, sorted and comma-separated."""
    return SEPARATOR.join((driver, group.lower(), tag_text))


def _published_text(facts: NodeFacts) -> str:
    """The text that a node's facts were read from."""
    return _text(
        facts.driver, facts.conductor_group, ','.join(sorted(facts.tags))
    )


def is_uuid(ident: str) -> bool:
    # Ironic reads an identifier shaped like a uuid as one, never as a
    # name.
    try:
        return str(uuidlib.UUID(ident)) == ident.lower()
    except ValueError:
        return False


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
        self.key = key
        self.interval = interval
        self.rescan = rescan
        self.api_group = api_group.encode('utf-8')
        self.warm_timeout = warm_timeout
        self._clock = clock
        # Replaced whole, one bucket at a time: lookups read without a
        # lock.
        self._buckets: list[dict[str, NodeFacts]] = [
            {} for _ in range(BUCKETS)
        ]
        self._digests = [tag_board.EMPTY_DIGEST] * BUCKETS
        # The holder's buckets as published (tags as canonical text); None
        # while this process does not hold the lock.
        self._published: list[tag_board.Bucket] | None = None
        self._last_full: float | None = None
        self._notices = change_notices.NoticeTracker()
        # The last index read whole, while following: see _adopted.
        self._followed: tag_board.Index | None = None
        self._bad: dict[str, str] = {}
        self._parsed: dict[str, NodeFacts] = {}
        self._installing = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._backend_outage = outage.Outage(LOG, clock)
        self._database_outage = outage.Outage(LOG, clock)
        # Where the tags in use were read from, for the start's log line.
        self._source = ''
        #: Set once every node's tags have been read at least once.
        self.loaded = threading.Event()
        #: Bumped whenever any node's tags change, for callers' caches.
        self.version = 0
        #: Rows read from the nodes table by the last refresh.
        self.last_rows = 0
        #: Whether the last refresh read every row of it.
        self.last_full = False
        #: Buckets read from the backend since start, for measurements.
        self.buckets_read = 0
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
                    'how': self._source,
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
            self._install_all(self._read_all())
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

    def facts(self, uuid: str) -> NodeFacts | None:
        """All that is held of the node, or None for a node not read yet;
        what this process read itself wins over what was published until
        the publication catches up (see :meth:`lookup`)."""
        held = self._held(uuid)
        if self.fresh:
            return self.fresh.held(uuid, held)  # type: ignore[no-any-return]
        return held

    def lookup(self, uuid: str) -> frozenset[str] | None:
        """The node's tags, read from its row first if they are not held.

        This is what placement asks: no node is placed without the tags
        that are in the database, even in the seconds before the node
        is published. None for a node that is not in the database (a
        creation routed before its row exists); tags of the type
        :class:`~ironic_affinity.integration.data.fresh_nodes.BeingCreated`
        for the node this thread is creating.

        :raises: NodeTagsUnreadable when the row must be read and cannot.
        """
        found = self.fresh.lookup(uuid, self._held(uuid))
        return None if found is None else found.tags

    def written(self, uuid: str) -> None:
        """This process has just created or updated the node through
        Ironic's API: place it by what its row holds now."""
        self.fresh.written(uuid)

    def _read_one(self, uuid: str) -> NodeFacts | None:
        """The facts in one node's row, by uuid; None without one."""
        with self.database.engine.connect() as connection:
            rows = ironic_db.nodes_by_uuid(connection, uuid, COLUMNS)
        if not rows:
            return None
        found_uuid, extra, driver, group = rows[0]
        return self._facts(
            self._canonical(found_uuid, extra, driver, group, warn=False)
        )

    def _held(self, uuid: str) -> NodeFacts | None:
        return self._buckets[tag_board.bucket_of(uuid)].get(uuid)

    def nodes(self) -> list[tuple[str, NodeFacts]]:
        """(uuid, facts) of every node held, for the placement metrics."""
        return [item for bucket in self._buckets for item in bucket.items()]

    def __len__(self) -> int:
        return sum(len(bucket) for bucket in self._buckets)

    def full_due_in(self) -> float:
        """Seconds until the holder's next full read is due; 0 if it is."""
        if self._last_full is None:
            return 0.0
        return max(0.0, self._last_full + self.rescan - self._clock())

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
        self.last_rows = 0
        self.last_full = False
        try:
            if self.board.try_lead():
                self._lead(started)
            else:
                self._follow()
        except sa.exc.SQLAlchemyError as exc:
            # Only the holder reads the database: it keeps the lock and,
            # once the database answers, reads every node, since the
            # notices it had taken may not have been read.
            self._last_full = None
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
            self._published = None
            LOG.warning(
                'Lost the lock of the node affinity tags reader while '
                'publishing (a stall longer than [affinity]member_timeout'
                '); another process takes over the reading'
            )
            return
        except Exception as exc:  # noqa: BLE001 - keep serving
            self.board.discard()
            self._published = None
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
        self.fresh.prune(self._held)
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

    # The holder of the lock

    def _lead(self, started: float) -> None:
        entries = self.board.read_entries(self.api_group)
        took_over = self._published is None
        if took_over:
            self._published = self._adopted()
        idents, missed = self._notices.new(entries)
        published = self._published
        if published is None or missed or self.full_due_in() <= 0:
            rows = self._read_all()
            self._notices.prime(entries)
            self._last_full = started
            fresh = _bucketed(rows)
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
            self.database.probe()  # as a follower does, see _follow
        if took_over and self._published is not None:
            # Readers take buckets from the index's publisher, ours now:
            # every bucket goes out under our name.
            changed = dict(enumerate(self._published))
        for number, bucket in changed.items():
            self._install(number, bucket)
        if changed:
            # Digests as installed: what readers compute of the same.
            self.board.publish(
                changed,
                list(self._digests),
                full_age=self._clock()
                - (started if self._last_full is None else self._last_full),
                notices_seen=self._notices.seen,
            )
        self._source = 'from the database, for the whole deployment'
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
        self.loaded.set()

    def _adopted(self) -> list[tag_board.Bucket] | None:
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
        index, self._followed = self._followed, None
        if (
            index is None
            or index.full_at is None
            or index.notices_seen is None
            or tuple(self._digests) != index.digests
        ):
            return None
        age = self.board.seconds_since(index.full_at)
        if age >= self.rescan:
            return None  # a full read is due anyway
        buckets: list[tag_board.Bucket] = [
            {uuid: _published_text(facts) for uuid, facts in nodes.items()}
            for nodes in self._buckets
        ]
        # What we hold is what was published, to the byte.
        if any(
            tag_board.digest(bucket) != wanted
            for bucket, wanted in zip(buckets, index.digests, strict=True)
        ):
            return None
        self._notices.adopt(index.notices_seen)
        self._last_full = self._clock() - age
        return buckets

    def _read_changes(
        self, published: list[tag_board.Bucket], idents: set[str]
    ) -> dict[int, tag_board.Bucket]:
        """The buckets that the noted nodes change, read by index."""
        with self.database.engine.connect() as connection:
            rows = ironic_db.nodes_by_ident(
                connection, sorted(idents), COLUMNS
            )
        self.last_rows = len(rows)
        changed: dict[int, tag_board.Bucket] = {}

        def bucket(uuid: str) -> tag_board.Bucket:
            number = tag_board.bucket_of(uuid)
            if number not in changed:
                changed[number] = dict(published[number])
            return changed[number]

        found = set()
        for uuid, *values in rows:
            found.add(uuid)
            bucket(uuid)[uuid] = self._canonical(uuid, *values)
        for ident in idents:
            # A uuid noted but not found: the node was deleted.
            if is_uuid(ident) and ident not in found:
                bucket(ident).pop(ident, None)
        for number in list(changed):
            if changed[number] == published[number]:
                del changed[number]
            else:
                published[number] = changed[number]
        return changed

    # Every other process

    def _follow(self) -> None:
        self._published = None
        # No row of the nodes table, but one statement: so that this
        # process sees a database outage when it makes no lookup meanwhile
        # (the active conductors' source reads failed_at).
        self.database.probe()
        index = self.board.read_index()
        if index is None:
            if not self.loaded.is_set():
                # Nobody has published yet: the first processes of a
                # deployment start together. Read once for ourselves.
                self._install_all(self._read_all())
            return
        complete = True
        for number, wanted in enumerate(index.digests):
            if wanted == self._digests[number]:
                continue
            found = self.board.read_bucket(index.publisher, number)
            self.buckets_read += 1
            if found is None:
                complete = False  # mid-publication: next time
                continue
            self._install(number, found)
        if complete:
            self._source = 'from the coordination backend'
            self._followed = index
            self.loaded.set()

    # Reading and installing

    def _read_all(self) -> list[tuple[str, str]]:
        """(uuid, published text) of every node."""
        interned: dict[str, str] = {}
        rows: list[tuple[str, str]] = []
        with self.database.engine.connect() as connection:
            for batch in _batches(connection):
                # A read of every node can outlast the lock on a busy host.
                self.board.keep_leading()
                for uuid, *values in batch:
                    text = self._canonical(uuid, *values)
                    rows.append((uuid, interned.setdefault(text, text)))
        self.last_rows = len(rows)
        self.last_full = True
        LOG.debug(
            'Read the affinity tags of all %(count)d nodes',
            {'count': len(rows)},
        )
        return rows

    def _install_all(self, rows: Iterable[tuple[str, str]]) -> None:
        for number, bucket in enumerate(_bucketed(rows)):
            self._install(number, bucket)
        self._source = 'from the database, for this process alone'
        self.loaded.set()

    def _install(self, number: int, bucket: tag_board.Bucket) -> None:
        """Make one bucket's published contents the tags of its nodes."""
        if len(self._parsed) > 4 * BUCKETS * 16:
            # Nodes share a few hundred tag sets; this many means sets
            # that no node carries any more are kept: start again.
            self._parsed = {}
        nodes = {uuid: self._facts(text) for uuid, text in bucket.items()}
        with self._installing:
            if nodes != self._buckets[number]:
                self._buckets[number] = nodes
                self.version += 1
            self._digests[number] = tag_board.digest(bucket)
        time.sleep(0)  # see BATCH

    def _facts(self, text: str) -> NodeFacts:
        found = self._parsed.get(text)
        if found is None:
            found = NO_FACTS  # not written by us: never trusted
            parts = text.rsplit(SEPARATOR, 2)
            if len(parts) == 3:
                try:
                    node_tags = tags.parse_tags(
                        parts[2], 'published node tags'
                    )
                except exception.InvalidTag:
                    node_tags = NO_TAGS
                found = NodeFacts(parts[0], parts[1], node_tags)
            self._parsed[text] = found
        return found

    def _canonical(
        self,
        uuid: str,
        extra: Any,
        driver: str | None,
        group: str | None,
        warn: bool = True,
    ) -> str:
        """A node's row as published (see :func:`_text`).

        :param warn: warn of unusable tags: the reader of the table
            does, one process for the deployment; a row read for a
            lookup is placed the same way without a warning of its own.
        """
        return _text(
            driver or '', group or '', self._tag_text(uuid, extra, warn)
        )

    def _tag_text(self, uuid: str, extra: Any, warn: bool = True) -> str:
        try:
            node_tags = tags_from_extra(extra, self.key, uuid)
        except (exception.InvalidTag, ValueError) as exc:
            if not warn:
                return ''
            # Once per node and value: the row is read again by every full
            # read.
            if self._bad.get(uuid) != str(exc):
                LOG.warning(
                    'Node %(node)s has unusable affinity tags and is placed '
                    'as untagged until they are fixed: %(error)s',
                    {'node': uuid, 'error': exc},
                )
            self._bad[uuid] = str(exc)
            return ''
        self._bad.pop(uuid, None)
        return ','.join(sorted(node_tags))
