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
key-value store, so the tags ride in capabilities:

* nodes are split into :data:`BUCKETS` buckets by a hash of their uuid;
  the holder joins one group per bucket, ``<group>.node-tags.<xx>``, with
  that bucket's ``{uuid: text}`` as its capabilities, each node's text
  written by :mod:`ironic_affinity.integration.data.node_facts` (about
  50 KB a bucket at 100,000 nodes, within every driver's value size);
* it joins the index group ``<group>.node-tags`` with a digest of each
  bucket and the time it took the lock.

The board does not look inside a node's text. Entries follow the rule
of members' entries (:mod:`ironic_affinity.membership.capabilities`):
readers ignore keys they do not know, and a change an older reader
would misread bumps :data:`FORMAT_VERSION`.

A reader reads the index once per interval (one or two calls) and only
the buckets whose digest differs from that of what it holds: nothing
when nothing changed, one bucket per changed node otherwise. Digests,
not counters, so that a new holder after a failover, which publishes
anew under its own member id, costs readers nothing for the buckets
that did not change meanwhile.

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
import dataclasses
import hashlib
import json
import time
from typing import Any
import zlib

from tooz import coordination

from ironic_affinity import exception
from ironic_affinity._i18n import _
from ironic_affinity.membership import backend
from ironic_affinity.membership import reading

FORMAT_VERSION = 1
BUCKETS = 256
# Far above a bucket's size at a million nodes (about 300 KB with their
# creation times), below the smallest value bound of a supported driver
# (ZooKeeper's 1 MiB is the server default; Redis and etcd allow more).
MAX_BUCKET_BYTES = 1024 * 1024

Bucket = dict[str, str]


def bucket_of(uuid: str) -> int:
    """The bucket of a node: stable across processes and hash seeds."""
    return zlib.crc32(uuid.encode('utf-8')) % BUCKETS


def digest(bucket: Mapping[str, str]) -> str:
    """A bucket's digest: equal contents give equal digests in every
    process."""
    # Of the canonical JSON.
    text = json.dumps(dict(bucket), sort_keys=True, separators=(',', ':'))
    return hashlib.blake2b(text.encode('utf-8'), digest_size=8).hexdigest()


EMPTY_DIGEST = digest({})


def index_group(group: str) -> bytes:
    return ('%s.node-tags' % group).encode('utf-8')


def bucket_group(group: str, bucket: int) -> bytes:
    return ('%s.node-tags.%02x' % (group, bucket)).encode('utf-8')


def lock_name(group: str) -> bytes:
    return ('%s.node-tags-reader' % group).encode('utf-8')


class LockLost(Exception):
    """The reader's lock expired in the middle of a publication."""


@dataclasses.dataclass(frozen=True)
class Index:
    """What the holder published: who it is, since when, and the digest
    of each bucket; and, so that a process taking over can carry on
    without reading every node again, when its last full read began
    (seconds since the epoch) and the number of the last change notice
    it had read from each API process. Those two may lag (they are
    published with the buckets), which only makes a successor read more.
    """

    publisher: bytes
    since: float
    digests: tuple[str, ...]
    full_at: float | None = None
    notices_seen: Mapping[str, int] | None = None


def _decode(raw: Any) -> Any:
    if isinstance(raw, bytes):
        raw = raw.decode('utf-8')
    if isinstance(raw, str):
        if len(raw) > MAX_BUCKET_BYTES:
            raise exception.InvalidCapabilities(_('larger than 1 MiB'))
        raw = json.loads(raw) if raw else None
    if not isinstance(raw, dict) or raw.get('format') != FORMAT_VERSION:
        raise exception.InvalidCapabilities(
            _('not a node-tags publication of format %d') % FORMAT_VERSION
        )
    return raw


def decode_index(publisher: bytes, raw: Any) -> Index:
    """:raises: InvalidCapabilities for anything but an index."""
    found = _decode(raw)
    digests = found.get('digests')
    since = found.get('since')
    if (
        not isinstance(digests, list)
        or len(digests) != BUCKETS
        or not all(isinstance(d, str) for d in digests)
        or not isinstance(since, (int, float))
    ):
        raise exception.InvalidCapabilities(_('malformed node-tags index'))
    full_at = found.get('full_at')
    seen = found.get('notices_seen')
    if not isinstance(full_at, (int, float)) or isinstance(full_at, bool):
        full_at = None
    if not isinstance(seen, dict) or not all(
        isinstance(k, str) and isinstance(v, int) and not isinstance(v, bool)
        for k, v in seen.items()
    ):
        seen = None
    return Index(
        publisher,
        float(since),
        tuple(digests),
        None if full_at is None else float(full_at),
        seen,
    )


def decode_bucket(raw: Any) -> Bucket:
    """A bucket's ``{uuid: text}``.

    :raises: InvalidCapabilities for anything but a bucket.
    """
    found = _decode(raw)
    nodes = found.get('nodes')
    if not isinstance(nodes, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in nodes.items()
    ):
        raise exception.InvalidCapabilities(_('malformed node-tags bucket'))
    return nodes


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
        lock = client.get_lock(lock_name(self.group))
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
        buckets: Mapping[int, Bucket],
        digests: list[str],
        full_age: float | None = None,
        notices_seen: Mapping[str, int] | None = None,
    ) -> None:
        """Publish these buckets, then the index of every digest: a
        reader that sees the new index finds the new buckets.

        :param digests: every bucket's :func:`digest`.
        :param full_age: seconds since the holder's last full read began.
        :param notices_seen: the last change notice read, by API process.
        :raises: LockLost when the lock expired meanwhile: the index is
            not published, and the next holder publishes anew.
        """
        for number, nodes in sorted(buckets.items()):
            if not self.keep_leading():
                raise LockLost()
            self._join(
                bucket_group(self.group, number),
                {'format': FORMAT_VERSION, 'nodes': dict(nodes)},
            )
        if not self.keep_leading():
            raise LockLost()
        self._join(
            index_group(self.group),
            {
                'format': FORMAT_VERSION,
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

    def read_index(self) -> Index | None:
        """The newest holder's index; None when nobody has published.

        :raises: tooz errors when the backend cannot be read.
        """
        client = self._started()
        self.calls += 1
        found = reading.members_by_name(
            client, index_group(self.group), self.timeout
        )
        indexes = []
        for name, raw in (found or {}).items():
            try:
                indexes.append(decode_index(name.encode('utf-8'), raw))
            except (exception.InvalidCapabilities, ValueError):
                continue  # a foreign or half-written entry: not ours
        if not indexes:
            return None
        return max(indexes, key=lambda index: (index.since, index.publisher))

    def read_bucket(self, publisher: bytes, number: int) -> Bucket | None:
        """One bucket as ``publisher`` published it; None if it has not
        (yet, or any more).

        :raises: InvalidCapabilities for a malformed bucket; tooz errors
            when the backend cannot be read.
        """
        client = self._started()
        self.calls += 1
        try:
            raw = client.get_member_capabilities(
                bucket_group(self.group, number), publisher
            ).get(timeout=self.timeout)
        except (coordination.MemberNotJoined, coordination.GroupNotCreated):
            return None
        return decode_bucket(raw)
