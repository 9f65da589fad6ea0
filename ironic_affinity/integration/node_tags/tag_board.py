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

"""Node affinity tags published through the coordination backend.

One process of a deployment at a time, the holder of a tooz lock, reads
Ironic's nodes table and publishes every node's tags here; every other
process reads them from here and never from the database. tooz offers
groups with per-member capabilities and locks on every driver, but no
key-value store, so the tags ride in capabilities, as
:mod:`.board_format` lays them out.

A reader reads the index once per interval (one or two calls) and only
the buckets whose digest differs from that of what it holds: nothing
when nothing changed, one bucket per changed node otherwise.

The holder's entries expire with its heartbeats (the member timeout), and
its lock with them, so another process takes over within that time. For
the short while two holders' entries coexist, readers follow the index
entry that took the lock last.

A full read and its publication can outlast the member timeout on a busy
host (20,000 nodes took 3.5 s to read and longer to publish under
power-sync load, against a 5 s timeout): the holder renews the lock
between batches and buckets (:meth:`TagBoard.keep_leading`). Without
that the lock expired mid-publication, the next process took it and had
to read and publish everything in turn, and so on: the table was read in
full every few seconds.
"""

from collections.abc import Mapping
import time
from typing import Any

from tooz import coordination

from ironic_affinity import exception
from ironic_affinity.integration.node_tags import board_format
from ironic_affinity.membership import backend
from ironic_affinity.membership import reading


class LockLost(Exception):
    """The reader's lock expired in the middle of a publication."""


class TagBoard:
    """One process's client of the published tags: as a reader always,
    as the publisher while it holds the lock.

    Not thread-safe: one thread (the tag cache's) uses it.
    """

    def __init__(
        self,
        url: str,
        group: str,
        member_id: str,
        timeout: int,
        wall_clock: Any = time.time,
        clock: Any = time.monotonic,
    ) -> None:
        """:param timeout: the member timeout, which is also the lock's.
        :param wall_clock: seconds since the epoch, for the index's time
            of taking the lock, which every host compares.
        :param clock: monotonic seconds, for the lock's renewals.
        """
        self.url = url
        self.group = group
        self.member_id = member_id
        self.timeout = timeout
        self._wall_clock = wall_clock
        self._clock = clock
        self._renewed = 0.0
        self._client: coordination.CoordinationDriver | None = None
        self._lock: Any = None
        self._joined: set[bytes] = set()
        self._since = 0.0
        #: Calls made to the backend, for measurements.
        self.calls = 0

    @property
    def leading(self) -> bool:
        """Whether this process holds the lock (as of its last check)."""
        return self._lock is not None

    def _started(self) -> coordination.CoordinationDriver:
        if self._client is None:
            client = backend.coordinator(
                self.url, self.member_id, self.timeout
            )
            client.start(start_heart=False)
            self._client = client
        return self._client

    def discard(self) -> None:
        """Drop the client without leaving (after a failure, or to step
        down): the lock and entries expire, or close with the session."""
        if self._client is not None:
            backend.discard(self._client)
        self._client = None
        self._lock = None
        self._joined = set()

    def stop(self) -> None:
        """Leave every group and release the lock, so that another
        process takes over at once rather than after the timeout."""
        if self._client is None:
            return
        try:
            if self._lock is not None:
                self._lock.release()
            self._client.stop()
        except Exception:  # noqa: BLE001 - it expires anyway
            backend.discard(self._client)
        self._client = None
        self._lock = None
        self._joined = set()

    def try_lead(self) -> bool:
        """Take the lock if nobody holds it; keep it alive if we do.

        :returns: whether this process now holds it. A holder that finds
            the lock lost (expired while it stalled, say) stops leading.
        :raises: tooz errors when the backend cannot be reached.
        """
        client = self._started()
        if self._lock is not None:
            self._renew(client)
            return self._lock is not None
        lock = client.get_lock(board_format.lock_name(self.group))
        self.calls += 1
        if lock.acquire(blocking=False):
            self._lock = lock
            self._since = self._wall_clock()
            self._renewed = self._clock()
            client.heartbeat()
        return self._lock is not None

    def keep_leading(self) -> bool:
        """Renew the lock in the middle of a long read or publication,
        at most every quarter of the timeout; a no-op for a reader.

        :returns: whether this process still holds the lock.
        :raises: tooz errors when the backend cannot be reached.
        """
        if self._lock is None or self._client is None:
            return False
        if self._clock() - self._renewed >= self.timeout / 4:
            self._renew(self._client)
        return self._lock is not None

    def _renew(self, client: coordination.CoordinationDriver) -> None:
        self.calls += 2
        client.heartbeat()
        # Redis and etcd locks expire unless refreshed; ZooKeeper's
        # and file locks last as long as their session or process.
        refresh = getattr(self._lock, 'heartbeat', None)
        try:
            if refresh is not None:
                kept = refresh()
            else:
                kept = self._lock.is_still_owner()
        except coordination.ToozError:
            kept = False
        if kept is False:
            # Someone else may hold it now: stop publishing, and let
            # our entries go with this client.
            self.discard()
        else:
            self._renewed = self._clock()

    def _join(self, group: bytes, capabilities: dict[str, Any]) -> None:
        client = self._started()
        if group in self._joined:
            self.calls += 1
            try:
                client.update_capabilities(group, capabilities).get(
                    timeout=self.timeout
                )
                return
            except coordination.MemberNotJoined:
                # Our entry expired under us: join again below.
                pass
            except NotImplementedError:
                # The file driver cannot update in place.
                client.leave_group(group).get(timeout=self.timeout)
            self._joined.discard(group)
        self.calls += 2
        try:
            client.create_group(group).get(timeout=self.timeout)
        except coordination.GroupAlreadyExist:
            pass
        try:
            client.join_group(group, capabilities).get(timeout=self.timeout)
        except coordination.MemberAlreadyExist:
            client.update_capabilities(group, capabilities).get(
                timeout=self.timeout
            )
        self._joined.add(group)

    def publish(
        self,
        buckets: Mapping[int, board_format.Bucket],
        digests: list[str],
        full_age: float | None = None,
        notices_seen: Mapping[str, int] | None = None,
    ) -> None:
        """Publish these buckets, then the index of every digest: a
        reader that sees the new index finds the new buckets.

        :param digests: every bucket's :func:`board_format.digest`.
        :param full_age: seconds since the holder's last full read began.
        :param notices_seen: the last change notice read, by API process.
        :raises: LockLost when the lock expired meanwhile: the index is
            not published, and the next holder publishes anew.
        """
        for number, nodes in sorted(buckets.items()):
            if not self.keep_leading():
                raise LockLost()
            self._join(
                board_format.bucket_group(self.group, number),
                {'format': board_format.FORMAT_VERSION, 'nodes': dict(nodes)},
            )
        if not self.keep_leading():
            raise LockLost()
        self._join(
            board_format.index_group(self.group),
            {
                'format': board_format.FORMAT_VERSION,
                'since': self._since,
                'digests': list(digests),
                'full_at': (
                    None if full_age is None else self._wall_clock() - full_age
                ),
                'notices_seen': dict(notices_seen or {}),
            },
        )

    def seconds_since(self, wall_time: float) -> float:
        """Seconds since a time another host published, never below 0
        (its clock may be ahead of ours)."""
        return max(0.0, float(self._wall_clock()) - wall_time)

    def describe(self, exc: BaseException) -> str:
        """An error of this backend, for a person, without secrets."""
        return backend.describe(exc, self.url)

    def read_entries(self, group: bytes) -> dict[str, object]:
        """Every member of another group with its capabilities.

        :raises: tooz errors when the backend cannot be read.
        """
        self.calls += 1
        found = reading.members_by_name(self._started(), group, self.timeout)
        return found or {}

    def read_index(self) -> board_format.Index | None:
        """The newest holder's index; None when nobody has published.

        :raises: tooz errors when the backend cannot be read.
        """
        client = self._started()
        self.calls += 1
        found = reading.members_by_name(
            client, board_format.index_group(self.group), self.timeout
        )
        indexes = []
        for name, raw in (found or {}).items():
            try:
                indexes.append(
                    board_format.decode_index(name.encode('utf-8'), raw)
                )
            except (exception.InvalidCapabilities, ValueError):
                continue  # a foreign or half-written entry: not ours
        if not indexes:
            return None
        return max(indexes, key=lambda index: (index.since, index.publisher))

    def read_bucket(
        self, publisher: bytes, number: int
    ) -> board_format.Bucket | None:
        """One bucket as ``publisher`` published it; None if it has not
        (yet, or any more).

        :raises: InvalidCapabilities for a malformed bucket; tooz errors
            when the backend cannot be read.
        """
        client = self._started()
        self.calls += 1
        try:
            raw = client.get_member_capabilities(
                board_format.bucket_group(self.group, number), publisher
            ).get(timeout=self.timeout)
        except (coordination.MemberNotJoined, coordination.GroupNotCreated):
            return None
        return board_format.decode_bucket(raw)
