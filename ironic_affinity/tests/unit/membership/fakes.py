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

"""An in-memory coordination backend, and the tooz clients that use it.

Enough of a tooz driver for the timing logic of Member and MemberView:
groups of members with capabilities, members that expire when they stop
beating (as on Redis: a heartbeat is per client, not per group), and
switches a test flips: the backend down (every call fails with
ToozConnectionError), restarted empty, or slow (a call blocks until the
test lets it through); and one client that hangs (its calls block until
the test releases it, as a ZooKeeper client's do while it waits to
reconnect) while new clients get answers. Every call of a client checks
that no other thread is inside the same client, which a real driver does
not survive.

Calls are answered when made and their result kept in a :class:`Result`,
which has the ``get(timeout=)`` of the results tooz drivers return.
"""

import copy
import dataclasses
import logging
import threading
from typing import Any

import fixtures
import tooz
from tooz import coordination

from ironic_affinity.membership import backend
from ironic_affinity.tests import base
from ironic_affinity.tests import fake_clock

# The longest a slow call waits for the test to let it through: a test
# that forgets to must fail, not hang.
SLOW_LIMIT = 5.0


# The clock the fakes and the code under test share.
Clock = fake_clock.Clock


class Result:
    """An answer, or an error, handed out by ``get()``."""

    def __init__(self, value: Any = None, error: Exception | None = None):
        self._value = value
        self._error = error
        self.timeouts: list[float | None] = []

    def get(self, timeout: float | None = None) -> Any:
        self.timeouts.append(timeout)
        if self._error is not None:
            raise self._error
        return self._value


@dataclasses.dataclass
class Entry:
    capabilities: Any


class Backend:
    """The server: what every client of one test sees."""

    def __init__(self, clock: Clock, timeout: float = 5.0) -> None:
        self.clock = clock
        # Seconds after its last beat that a member is dropped.
        self.timeout = timeout
        self.groups: dict[bytes, dict[bytes, Entry]] = {}
        self.beats: dict[bytes, float] = {}
        self.down = False
        # Whether update_capabilities works (the file driver's does not).
        self.updates_in_place = True
        # Called once, after the next get_members, if set.
        self.after_list: Any = None
        # Open unless a test makes calls slow.
        self._gate = threading.Event()
        self._gate.set()
        self.blocked = threading.Event()
        self.clients: list[Client] = []
        # ('join' | 'leave' | 'update', member) in order, for tests.
        self.history: list[tuple[str, str]] = []
        # Lock name -> (holder's member id, clock() when it expires).
        self.locks: dict[bytes, tuple[bytes, float]] = {}

    def go_down(self) -> None:
        self.down = True

    def come_back(self) -> None:
        self.down = False

    def restart_empty(self) -> None:
        """The server restarted without its data."""
        self.groups.clear()
        self.beats.clear()
        self.locks.clear()

    def holder(self, name: bytes) -> bytes | None:
        """Who holds a lock now, expiry applied."""
        found = self.locks.get(name)
        if found is None or found[1] < self.clock():
            self.locks.pop(name, None)
            return None
        return found[0]

    def make_slow(self) -> None:
        """Calls block (in the client) until :meth:`let_through`."""
        self.blocked.clear()
        self._gate.clear()

    def let_through(self) -> None:
        self._gate.set()

    def wait_gate(self) -> None:
        if not self._gate.is_set():
            self.blocked.set()
            if not self._gate.wait(SLOW_LIMIT):
                raise AssertionError('a slow call was never let through')

    def add(
        self, group: bytes, member: bytes, capabilities: Any, beat=True
    ) -> None:
        """A member written by some other process."""
        self.groups.setdefault(group, {})[member] = Entry(capabilities)
        if beat:
            self.beats[member] = self.clock()

    def alive(self, group: bytes) -> dict[bytes, Entry]:
        """The group's members that still beat; expired ones dropped."""
        entries = self.groups[group]
        now = self.clock()
        for member in list(entries):
            if now - self.beats.get(member, -1e9) > self.timeout:
                del entries[member]
        return entries

    def members(self, group: bytes) -> dict[str, Any]:
        """What a reader would see now, by name; for assertions."""
        if group not in self.groups:
            return {}
        return {
            m.decode(): e.capabilities for m, e in self.alive(group).items()
        }

    def overlaps(self) -> list[str]:
        found: list[str] = []
        for client in self.clients:
            found.extend(client.overlaps)
        return found


class Client:
    """One tooz client (coordinator) of the fake backend."""

    def __init__(self, backend: Backend, member_id: bytes) -> None:
        self.backend = backend
        self.member_id = member_id
        self.started = False
        self.stopped = False
        # As tooz drivers keep it: groups this client joined.
        self._joined_groups: set[bytes] = set()
        self._inside = 0
        self._inside_lock = threading.Lock()
        self.overlaps: list[str] = []
        self.calls: list[str] = []
        # Cleared while the client hangs: see hang().
        self._answering = threading.Event()
        self._answering.set()
        backend.clients.append(self)

    def hang(self) -> None:
        """This client's calls block until :meth:`release`; other
        clients' do not."""
        self._answering.clear()

    def release(self) -> None:
        self._answering.set()

    def _wait_answering(self) -> None:
        if not self._answering.is_set():
            self.backend.blocked.set()
            if not self._answering.wait(SLOW_LIMIT):
                raise AssertionError('a hung client was never released')

    # Every call goes through here: one thread at a time, or noted.
    def _call(self, name: str, work: Any) -> Result:
        with self._inside_lock:
            self._inside += 1
            if self._inside > 1:
                self.overlaps.append(
                    '%s entered while another thread was inside %s'
                    % (threading.current_thread().name, self.member_id)
                )
        try:
            self.calls.append(name)
            self.backend.wait_gate()
            self._wait_answering()
            if self.backend.down:
                return Result(
                    error=coordination.ToozConnectionError(
                        'Error 111 connecting: Connection refused'
                    )
                )
            if not self.started and name != 'start':
                return Result(error=tooz.ToozError('not started'))
            try:
                return Result(work())
            except tooz.ToozError as exc:
                return Result(error=exc)
        finally:
            with self._inside_lock:
                self._inside -= 1

    def start(self, start_heart: bool = False) -> None:
        def work() -> None:
            self.started = True

        self._call('start', work).get()

    def stop(self) -> None:
        if not self.started:
            raise tooz.ToozError('not started')
        # As tooz's stop() does: leave every group joined, errors ignored.
        for group in list(self._joined_groups):
            try:
                self.leave_group(group).get()
            except tooz.ToozError:
                pass
        for name, (owner, _expiry) in list(self.backend.locks.items()):
            if owner == self.member_id:
                del self.backend.locks[name]
        self.started = False
        self.stopped = True

    def heartbeat(self) -> float:
        def work() -> float:
            self.backend.beats[self.member_id] = self.backend.clock()
            # As the Redis driver: a beat renews the locks held too.
            for name, (owner, _expiry) in list(self.backend.locks.items()):
                if owner == self.member_id:
                    self.backend.locks[name] = (
                        owner,
                        self.backend.clock() + self.backend.timeout,
                    )
            return self.backend.timeout

        return float(self._call('heartbeat', work).get())

    def _group(self, group: bytes) -> dict[bytes, Entry]:
        if group not in self.backend.groups:
            raise coordination.GroupNotCreated(group)
        return self.backend.alive(group)

    def create_group(self, group: bytes) -> Result:
        def work() -> None:
            if group in self.backend.groups:
                raise coordination.GroupAlreadyExist(group)
            self.backend.groups[group] = {}

        return self._call('create_group', work)

    def join_group(self, group: bytes, capabilities: Any = b'') -> Result:
        def work() -> None:
            entries = self._group(group)
            if self.member_id in entries:
                raise coordination.MemberAlreadyExist(group, self.member_id)
            entries[self.member_id] = Entry(copy.deepcopy(capabilities))
            self._joined_groups.add(group)
            self.backend.history.append(('join', self.member_id.decode()))

        return self._call('join_group', work)

    def leave_group(self, group: bytes) -> Result:
        def work() -> None:
            entries = self._group(group)
            if entries.pop(self.member_id, None) is None:
                raise coordination.MemberNotJoined(group, self.member_id)
            self._joined_groups.discard(group)
            self.backend.history.append(('leave', self.member_id.decode()))

        return self._call('leave_group', work)

    def get_members(self, group: bytes) -> Result:
        def work() -> set[bytes]:
            return set(self._group(group))

        result = self._call('get_members', work)
        hook, self.backend.after_list = self.backend.after_list, None
        if hook is not None:
            hook()
        return result

    def get_member_capabilities(self, group: bytes, member: bytes) -> Result:
        def work() -> Any:
            entries = self._group(group)
            if member not in entries:
                raise coordination.MemberNotJoined(group, member)
            return copy.deepcopy(entries[member].capabilities)

        return self._call('get_member_capabilities', work)

    def update_capabilities(self, group: bytes, capabilities: Any) -> Result:
        def work() -> None:
            if not self.backend.updates_in_place:
                raise tooz.NotImplemented('not in place')
            entries = self._group(group)
            if self.member_id not in entries:
                raise coordination.MemberNotJoined(group, self.member_id)
            entries[self.member_id].capabilities = copy.deepcopy(capabilities)
            self.backend.history.append(('update', self.member_id.decode()))

        return self._call('update_capabilities', work)

    def get_lock(self, name: bytes) -> 'Lock':
        return Lock(self, name)


class Lock:
    """A tooz lock on the fake backend, expiring as Redis's do."""

    def __init__(self, client: Client, name: bytes) -> None:
        self.client = client
        self.name = name

    def _mine(self) -> bool:
        return self.client.backend.holder(self.name) == self.client.member_id

    def acquire(self, blocking: bool = True) -> bool:
        assert blocking is False, 'the code under test never waits'

        def work() -> bool:
            backend = self.client.backend
            if backend.holder(self.name) is not None:
                return False
            backend.locks[self.name] = (
                self.client.member_id,
                backend.clock() + backend.timeout,
            )
            return True

        return bool(self.client._call('acquire', work).get())

    def heartbeat(self) -> bool:
        def work() -> bool:
            if not self._mine():
                return False
            backend = self.client.backend
            backend.locks[self.name] = (
                self.client.member_id,
                backend.clock() + backend.timeout,
            )
            return True

        return bool(self.client._call('lock_heartbeat', work).get())

    def release(self) -> bool:
        def work() -> bool:
            if not self._mine():
                return False
            del self.client.backend.locks[self.name]
            return True

        return bool(self.client._call('release', work).get())


class Factory:
    """Stands in for backend.coordinator: a new client on every call."""

    def __init__(self, backend: Backend) -> None:
        self.backend = backend
        self.made: list[Client] = []

    def __call__(self, url: str, member_id: str, timeout: int) -> Client:
        client = Client(self.backend, member_id.encode('utf-8'))
        self.made.append(client)
        return client


class BackendTestCase(base.TestCase):
    """Every coordinator the code under test makes is a client of one
    in-memory backend on a fake clock; the lines LOGGER logs are kept."""

    #: The module whose log lines the test reads.
    LOGGER = ''
    #: Seconds without a beat after which a member expires.
    EXPIRY = 5.0

    def setUp(self) -> None:
        super().setUp()
        self.clock = Clock()
        self.backend = Backend(self.clock, timeout=self.EXPIRY)
        self.factory = Factory(self.backend)
        self.coordinator = self.useFixture(
            fixtures.MockPatchObject(
                backend, 'coordinator', autospec=True,
                side_effect=self.factory,
            )
        ).mock  # fmt: skip
        self.log = self.useFixture(
            fixtures.FakeLogger(
                name=self.LOGGER,
                level=logging.INFO,
                format='%(levelname)s %(message)s',
            )
        )
