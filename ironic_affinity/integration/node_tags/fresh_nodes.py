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

"""A node's facts ahead of the shared tag cache: read through, or written.

The tag cache (:mod:`.tag_cache`) learns of a new node within a couple
of seconds; until then a process asked for that
node's conductor would have to place it without its tags, against hard
tags that are already in the database. So a process asked about a node
it does not hold reads that one row (Ironic's unique uuid index) and
places by it, and the API process that has just written a node reads it
again at once. What it read is kept here, ahead of the cache, until the
cache holds the same or ``keep`` seconds have passed (the cache has
caught up by then, or its last value is all there is to go by).

Reads are few and bounded: at most one per node until the cache or this
holds it, two at a time per process (other nodes' lookups wait, the same
node's lookups share the read), and a node that does not exist is not
read again for ``absent_seconds``.

A node being created has no row until the conductor its creation is
routed to writes it, so the API process says what it is creating
(:func:`creating`, from the request's body) for the thread that handles
the request: that node is then placed by the tags it is created with,
and looked up again in the database until its row is there.
"""

from collections.abc import Callable
from collections.abc import Iterator
import contextlib
import dataclasses
import threading
import time
from typing import Any

import sqlalchemy as sa

from ironic_affinity import exception
from ironic_affinity._i18n import _
from ironic_affinity.integration.data import ironic_db

# How many rows one process reads at once for lookups; its pool holds
# three connections, and the tag cache's own reads need one.
READERS = 2
# Absent uuids remembered, at most: past it the expired ones go.
MAX_ABSENT = 10000


class BeingCreated(frozenset[str]):
    """The tags of a node that this request creates and whose row is
    not written yet: its creation may go to any conductor if none may
    take it (the node is created, and is then an orphan)."""


@dataclasses.dataclass(frozen=True)
class _Entry:
    facts: Any  # the cache's NodeFacts
    at: float
    # False while the node is being created and its row not seen yet.
    stored: bool = True


_CREATING = threading.local()


@contextlib.contextmanager
def creating(facts: Any) -> Iterator[None]:
    """While this thread creates a node with these facts (tags, hardware
    type, conductor group): a lookup of a node not in the database is
    of that node."""
    _CREATING.facts = facts
    try:
        yield
    finally:
        _CREATING.facts = None


def _created_here() -> Any:
    return getattr(_CREATING, 'facts', None)


class FreshNodes:
    """Facts read or written by this process that the cache may lack."""

    def __init__(
        self,
        read: Callable[[str], Any],
        keep: Callable[[], float],
        absent_seconds: float = 1.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """:param read: a node's facts from its row, by uuid; None when
            there is no such row. May raise SQLAlchemyError.
        :param keep: seconds an entry wins over the cache at most.
        :param absent_seconds: how long a uuid found in no row is not
            read again.
        """
        self._read = read
        self._keep = keep
        self._absent_seconds = absent_seconds
        self._clock = clock
        self._entries: dict[str, _Entry] = {}
        self._absent: dict[str, float] = {}
        self._readers = threading.BoundedSemaphore(READERS)
        self._lock = threading.Lock()
        # uuid -> its read in progress.
        self._reading: dict[str, _Read] = {}
        #: Rows read for lookups since start, for measurements.
        self.rows_read = 0

    def __len__(self) -> int:
        return len(self._entries)

    def lookup(self, uuid: str, held: Any) -> Any:
        """The node's facts, given what the cache holds of it (or None).

        :returns: the facts to place by; None for a node not in the
            database; facts whose tags are :class:`BeingCreated` for the
            node this thread creates.
        :raises: NodeTagsUnreadable when the row cannot be read.
        """
        entry = self._entries.get(uuid) if self._entries else None
        if entry is not None:
            if not entry.stored:
                return self._read_created(uuid, entry)
            if self._wins(entry, held):
                return entry.facts
        if held is not None:
            return held
        absent_until = self._absent.get(uuid)
        if absent_until is not None:
            if self._clock() < absent_until and _created_here() is None:
                return None
            self._absent.pop(uuid, None)
        found = self._read_shared(uuid)
        if found is None:
            return self._absent_or_created(uuid)
        return found

    def held(self, uuid: str, held: Any) -> Any:
        """What to place the node by, without reading: the entry while
        it wins over what the cache holds (``held``)."""
        entry = self._entries.get(uuid)
        if entry is not None and entry.stored and self._wins(entry, held):
            return entry.facts
        return held

    def written(self, uuid: str) -> None:
        """This process has just written the node: read it again now.

        A failure is not raised: the cache brings the change within its
        usual bound.
        """
        self._absent.pop(uuid, None)
        with contextlib.suppress(exception.NodeTagsUnreadable):
            if self._read_shared(uuid) is None:
                self._entries.pop(uuid, None)

    def prune(self, held: Callable[[str], Any]) -> None:
        """Drop the entries the cache has caught up with or that are too
        old, and the absent uuids that have expired."""
        now = self._clock()
        for uuid, entry in list(self._entries.items()):
            if entry.stored and not self._wins(entry, held(uuid), now):
                self._entries.pop(uuid, None)
            elif now - entry.at >= self._keep():
                self._entries.pop(uuid, None)
        for uuid, until in list(self._absent.items()):
            if until <= now:
                self._absent.pop(uuid, None)

    def _wins(
        self, entry: _Entry, held: Any, now: float | None = None
    ) -> bool:
        if held == entry.facts:
            return False  # the cache has it: the entry is done with
        age = (self._clock() if now is None else now) - entry.at
        return age < self._keep()

    def _read_created(self, uuid: str, entry: _Entry) -> Any:
        """A node being created: its row's facts once written, else the
        facts it is created with."""
        found = self._read_shared(uuid)
        if found is not None:
            return found
        return dataclasses.replace(
            entry.facts, tags=BeingCreated(entry.facts.tags)
        )

    def _absent_or_created(self, uuid: str) -> Any:
        facts = _created_here()
        if facts is None:
            now = self._clock()
            if len(self._absent) >= MAX_ABSENT:
                self.prune(lambda _uuid: None)
            self._absent[uuid] = now + self._absent_seconds
            return None
        self._entries[uuid] = _Entry(facts, self._clock(), stored=False)
        return dataclasses.replace(facts, tags=BeingCreated(facts.tags))

    def _read_shared(self, uuid: str) -> Any:
        """The row's facts (None: no such row), kept as an entry: one
        read per node at a time, READERS at a time per process.

        :raises: NodeTagsUnreadable.
        """
        with self._lock:
            read = self._reading.get(uuid)
            mine = read is None
            if read is None:
                read = self._reading[uuid] = _Read()
        if not mine:
            read.done.wait()
        else:
            try:
                read.facts = self._read_row(uuid)
            except exception.NodeTagsUnreadable as exc:
                read.error = exc
            finally:
                with self._lock:
                    self._reading.pop(uuid, None)
                read.done.set()
        if read.error is not None:
            raise read.error
        return read.facts

    def _read_row(self, uuid: str) -> Any:
        with self._readers:
            try:
                found = self._read(uuid)
            except sa.exc.SQLAlchemyError as exc:
                raise exception.NodeTagsUnreadable(
                    _(
                        'the affinity tags of node %(node)s cannot be read '
                        'from the database (%(error)s)'
                    )
                    % {'node': uuid, 'error': ironic_db.error_text(exc)}
                ) from exc
        self.rows_read += 1
        if found is not None:
            self._entries[uuid] = _Entry(found, self._clock())
        return found


class _Read:
    """One read of a row in progress, and its outcome."""

    def __init__(self) -> None:
        self.done = threading.Event()
        self.facts: Any = None
        self.error: exception.NodeTagsUnreadable | None = None
