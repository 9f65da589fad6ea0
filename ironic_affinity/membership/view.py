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

"""The live member view every placing process holds.

A background thread (a real one) reads the group and every member's
capabilities every watch interval (reading.py), and publishes an
immutable snapshot (view_snapshot.py). The snapshot's version changes
exactly when the set of members or a member's profile changes, so
placement caches keyed by it are dropped then and only then.

Reading the group and finding it unreadable is not the same as finding
it empty: on an outage the last view is kept (and marked stale, with its
age), and when the backend comes back, or the group reappears empty after
a backend restart, members of the last view are kept for twice the
member timeout so that live conductors can rejoin before any node is re-placed.

One thread at a time reads through the view's tooz coordinator, which
is not safe to share between threads: see :meth:`MemberView.refresh`.
"""

from collections.abc import Callable
import dataclasses
import os
import socket
import threading
import time
import types
import uuid

from oslo_log import log
from tooz import coordination

from ironic_affinity import exception
from ironic_affinity import outage
from ironic_affinity import profile
from ironic_affinity.membership import backend
from ironic_affinity.membership import capabilities
from ironic_affinity.membership import lease
from ironic_affinity.membership import levels
from ironic_affinity.membership import reading
from ironic_affinity.membership import view_snapshot

LOG = log.getLogger(__name__)

# How many member timeouts members are held after an outage.
HOLD_TIMEOUTS = 2


def observer_id() -> str:
    # Readers never join, but tooz wants every client to have an id.
    return 'observer-%s-%d-%s' % (
        socket.gethostname(),
        os.getpid(),
        uuid.uuid4().hex[:8],
    )


class MemberView:
    """Watches the group; :meth:`snapshot` is cheap and thread-safe."""

    def __init__(
        self,
        url: str,
        group: str,
        watch_interval: float,
        timeout: int,
        clock: outage.Clock = time.monotonic,
        own_lease: Callable[[], lease.Lease | None] = lambda: None,
    ) -> None:
        """:param clock: what times outages and holds and stamps
        ``read_at``; tests pass a fake one (``Snapshot.age()`` assumes the
        default). The same clock as the lease's.
        :param own_lease: this process's own membership, if it is a
            conductor's: while it has run out, the view leaves this
            conductor out, as the other processes' views do."""
        self.url = url
        self.group = group.encode('utf-8')
        self.watch_interval = watch_interval
        self.timeout = timeout
        self._clock = clock
        self._snapshot = view_snapshot.EMPTY
        self._own_lease = own_lease
        # By name, members whose profile is unusable, and those that
        # publish a newer format level than this process reads.
        self._noted = outage.Conditions[str](LOG, clock)
        self._newer = outage.Conditions[str](LOG, clock)
        self._stand_downs = lease.StandDowns(LOG, clock)
        self._coordinator: coordination.CoordinationDriver | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._outage = outage.Outage(LOG, clock)
        #: Failed reads of the group since the view started, for metrics.
        self.read_errors = 0
        # Members of the last good view kept through a backend reset, and
        # until when.
        self._hold: dict[str, profile.ConductorProfile] = {}
        self._hold_until = 0.0
        self._group_missing = False
        self._changed = threading.Condition()
        # Held by the one thread reading through the coordinator; see
        # refresh().
        self._reading = threading.Lock()
        # The reader thread of refresh_within(), while it lives.
        self._reader: threading.Thread | None = None
        self._reader_lock = threading.Lock()

    def snapshot(self) -> view_snapshot.Snapshot:
        """The latest view. Atomic: one attribute read, and while this
        process is a conductor, one look at its lease's clock."""
        snap = self._snapshot
        own = self._own_lease()
        if own is None or own.name not in snap.members or not own.lapsed():
            return snap
        return self._stand_down(own)

    def _stand_down(self, own: lease.Lease) -> view_snapshot.Snapshot:
        """Leave this conductor out at once: its lease ran out between
        two reads, or while a read waits for a backend that is away."""
        with self._changed:
            snap = self._snapshot
            if own.name in snap.members:
                members = dict(snap.members)
                del members[own.name]
                snap = dataclasses.replace(
                    snap,
                    version=snap.version + 1,
                    members=types.MappingProxyType(members),
                    held=snap.held - {own.name},
                )
                self._snapshot = snap
                self._changed.notify_all()
                self._stand_downs.note(own, counted=False)
            return snap

    def start(self) -> None:
        """Read once now (for at most the member timeout), then keep
        reading from a background thread."""
        self.refresh_within(self.timeout)
        self._thread = threading.Thread(
            target=self._run, name='affinity-view', daemon=True
        )
        self._thread.start()

    def stop(self, timeout: float = 10.0) -> None:
        deadline = time.monotonic() + timeout
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)
        # A read still under way (one refresh_within() gave up on) owns
        # the coordinator: it discards it itself when it ends.
        if self._reading.acquire(
            timeout=max(0.0, deadline - time.monotonic())
        ):
            try:
                self._discard_coordinator()
            finally:
                self._reading.release()

    def wait_for(
        self,
        predicate: Callable[[view_snapshot.Snapshot], bool],
        timeout: float,
    ) -> view_snapshot.Snapshot | None:
        """Wait until ``predicate(snapshot)`` holds; for tests and tools."""
        deadline = time.monotonic() + timeout
        with self._changed:
            while True:
                snap = self._snapshot
                if predicate(snap):
                    return snap
                left = deadline - time.monotonic()
                if left <= 0:
                    return None
                self._changed.wait(left)

    def refresh_within(self, seconds: float) -> view_snapshot.Snapshot:
        r""":meth:`refresh`, giving up waiting after \`\`seconds\`\`.

        Some drivers retry a refused connection for about a minute (Redis)
        before they fail: a caller that cannot wait that long gets the
        last view, marked as unreadable. The read goes on in a daemon
        thread, which never holds the process at exit.
        """
        reader = self._reader_thread()
        reader.join(seconds)
        if not reader.is_alive():
            return self._snapshot
        return dataclasses.replace(
            self._snapshot, error='no answer within %s s' % seconds
        )

    def _reader_thread(self) -> threading.Thread:
        # A caller that comes while the reader of an earlier call still
        # waits for its answer waits for that same read: one reader
        # thread at most, however many callers give up on a backend
        # that does not answer. That read may have begun a moment
        # before this call, which a caller wanting "now" can live with.
        with self._reader_lock:
            if self._reader is None or not self._reader.is_alive():
                self._reader = threading.Thread(
                    target=self.refresh, name='affinity-view-read', daemon=True
                )
                self._reader.start()
            return self._reader

    def _run(self) -> None:
        while not self._stop.wait(self.watch_interval):
            self.refresh()

    def refresh(self) -> view_snapshot.Snapshot:
        """Read the group once and publish the result.

        Blocks while another thread reads: one lock covers a read and its
        publication, since a tooz coordinator is not safe in two threads
        and two publications at once could take one version for two
        views. A read that waited is still a read of its own.
        """
        with self._reading:
            started = self._clock()
            try:
                raw = self._read()
            except Exception as exc:  # noqa: BLE001 - any failure is an outage
                snapshot = self._publish_failure(exc)
            else:
                snapshot = self._publish(raw, started)
            if self._stop.is_set():
                # stop() could not discard the coordinator while we read.
                self._discard_coordinator()
        return snapshot

    def _read(self) -> dict[str, object] | None:
        """Each member's capabilities by name; None when no group."""
        if self._coordinator is None:
            self._coordinator = backend.coordinator(
                self.url, observer_id(), self.timeout
            )
            try:
                self._coordinator.start(start_heart=False)
            except Exception:
                self._coordinator = None
                raise
        # Bounded: a driver may otherwise wait as long as its server is
        # away (kazoo does), and an outage would never show as one.
        return reading.members_by_name(
            self._coordinator, self.group, self.timeout
        )

    def _decode(
        self, raw: dict[str, object]
    ) -> tuple[
        dict[str, profile.ConductorProfile],
        dict[str, str],
        dict[str, levels.Runs],
    ]:
        members = {}
        rejected = {}
        runs = {}
        for name, caps in raw.items():
            runs[name] = levels.runs_of(caps)
            levels.note_newer(self._newer, name, runs[name])
            try:
                members[name] = capabilities.decode(name, caps)
            except exception.InvalidCapabilities as exc:
                rejected[name] = str(exc)
                self._noted.raised(
                    name,
                    str(exc),
                    'Conductor %(name)s is left out of placement: its '
                    'published affinity profile is unusable: %(error)s',
                    {'name': name, 'error': exc},
                )
        for name in self._noted.keys() - set(rejected):
            self._noted.cleared(name)
        return members, rejected, runs

    def _publish(
        self, raw: dict[str, object] | None, started: float
    ) -> view_snapshot.Snapshot:
        now = self._clock()
        members, rejected, runs = self._decode(raw or {})
        with self._changed:
            return self._publish_locked(
                raw, members, rejected, started, now, runs
            )

    def _publish_locked(
        self,
        raw: dict[str, object] | None,
        members: dict[str, profile.ConductorProfile],
        rejected: dict[str, str],
        started: float,
        now: float,
        runs: dict[str, levels.Runs],
    ) -> view_snapshot.Snapshot:
        # Under the lock: _stand_down may replace the snapshot meanwhile.
        previous = self._snapshot
        vanished = raw is None
        # The group vanishing is news once, not on every read after it:
        # else members held through it would be held again and again.
        reset = vanished and not self._group_missing
        self._group_missing = vanished
        back = self._outage.recovered(
            'Coordination backend %(url)s readable again after '
            '%(seconds).1f s',
            {'url': backend.redact(self.url)},
        )
        if back or reset:
            # Back from an outage, or the group vanished under us (the
            # backend restarted empty): live conductors rejoin within a
            # heartbeat or two, so do not re-place their nodes meanwhile.
            self._hold = {**previous.members, **self._hold}
            # Twice the member timeout: a member's own client may need one
            # timeout to give up on its old connection before it rejoins.
            self._hold_until = now + HOLD_TIMEOUTS * self.timeout
        held = self._add_held(members, rejected, now)
        own = self._own_lease()
        if own is not None and own.name in members:
            counted = lease.counts_itself(own, started)
            self._stand_downs.note(own, counted)
            if not counted:
                del members[own.name]
                held -= {own.name}
        changed = (
            dict(previous.members) != members
            or dict(previous.rejected) != rejected
        )
        if changed:
            view_snapshot.log_change(
                LOG, self.group, previous.members, members
            )
        snapshot = view_snapshot.Snapshot(
            version=previous.version + 1 if changed else previous.version,
            members=types.MappingProxyType(members),
            rejected=types.MappingProxyType(rejected),
            read_at=now,
            held=held,
            runs=types.MappingProxyType(runs),
        )
        self._snapshot = snapshot
        self._changed.notify_all()
        return snapshot

    def _add_held(
        self,
        members: dict[str, profile.ConductorProfile],
        rejected: dict[str, str],
        now: float,
    ) -> frozenset[str]:
        """Put held members that have not rejoined into ``members``."""
        if not self._hold or now >= self._hold_until:
            self._hold = {}
            return frozenset()
        held = set()
        for name, kept in self._hold.items():
            if name not in members and name not in rejected:
                members[name] = kept
                held.add(name)
        return frozenset(held)

    def _publish_failure(self, exc: Exception) -> view_snapshot.Snapshot:
        self.read_errors += 1
        previous = self._snapshot
        error = backend.describe(exc, self.url)
        started = self._outage.failed(
            'Cannot read group %(group)s on coordination backend '
            '%(url)s: %(error)s. Keeping the last view of %(count)d '
            'conductor(s) until it can be read again.',
            {
                'group': self.group.decode(),
                'url': backend.redact(self.url),
                'error': error,
                'count': len(previous.members),
            },
        )
        if not started and self._outage.duration() > self.timeout:
            # Start again from a fresh client after a long outage.
            self._discard_coordinator()
        with self._changed:
            # The latest, which _stand_down may have replaced meanwhile.
            snapshot = dataclasses.replace(self._snapshot, error=error)
            self._snapshot = snapshot
            self._changed.notify_all()
        return snapshot

    def _discard_coordinator(self) -> None:
        if self._coordinator is not None:
            backend.discard(self._coordinator)
        self._coordinator = None
