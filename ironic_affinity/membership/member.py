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

"""A process's own membership: join, heartbeat, publish, rejoin, leave.

Conductors are members of the affinity group, with their profile as
capabilities; API processes of a group of their own (so the upgrade
check can tell whether any runs the plugin). Both use this class.

One real thread (not a green thread) does all of it, so the coordinator
is never used from two threads at once and a slow backend read elsewhere
cannot delay a heartbeat. Each beat also checks that this member is still
in the group and joins again when it is not: after the backend restarted
empty, after a ZooKeeper session or an etcd lease expired, or after this
process was stalled for longer than the member timeout.

The beat and the listing of members wait at most a deadline (the member
timeout) for the backend (deadline.py); a call that does not return in
time is an outage, and the next beat starts from a new client (else a
ZooKeeper heartbeat waiting through a server restart learns late that
its session expired).
"""

from collections.abc import Callable
import logging
import threading
import time
from typing import TypeVar

from oslo_log import log
import tooz
from tooz import coordination

from ironic_affinity import outage
from ironic_affinity.membership import backend
from ironic_affinity.membership import deadline
from ironic_affinity.membership import lease as lease_module
from ironic_affinity.membership import reading

LOG = log.getLogger(__name__)

T = TypeVar('T')

#: Given what a member published last (what its entry holds when it takes
#: one over; None when it joins) and what it wants to publish, what it
#: publishes now.
Compose = Callable[[object | None, dict[str, object]], dict[str, object]]


class Member:
    """Keeps one process in a group, with its capabilities published."""

    def __init__(
        self,
        url: str,
        group: str,
        name: str,
        published: dict[str, object],
        heartbeat_interval: float,
        timeout: int,
        role: str = 'Conductor',
        clock: outage.Clock = time.monotonic,
        call_deadline: float | None = None,
        compose: Compose | None = None,
        lease: lease_module.Lease | None = None,
        routine_updates: bool = False,
    ) -> None:
        """:param published: the capabilities to publish (JSON-able).
        :param compose: makes what is published from ``published`` and
            what was published before, at every beat; ``published`` as
            it is by default.
        :param role: how log lines name this member.
        :param clock: what measures outages; tests pass a fake one.
        :param call_deadline: seconds a heartbeat or a client's start may
            take before the client is given up; the member timeout by
            default: past it the entry is lost or about to be anyway.
        :param lease: renewed by each acknowledged heartbeat (see
            membership/lease.py).
        :param routine_updates: the capabilities change often and as a
            matter of course (an API process's change notices, at every
            write): each new publication is logged at DEBUG, not INFO."""
        self.url = url
        self.group = group.encode('utf-8')
        self.name = name
        self.role = role
        self._update_level = logging.DEBUG if routine_updates else logging.INFO
        self.heartbeat_interval = heartbeat_interval
        self.timeout = timeout
        self.call_deadline = (
            float(timeout) if call_deadline is None else call_deadline
        )
        self._capabilities = published
        self.lease = lease
        self._compose = compose
        self._published: dict[str, object] | None = None
        self._coordinator: coordination.CoordinationDriver | None = None
        self._started = False
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None
        self._outage = outage.Outage(LOG, clock)
        self.joined = threading.Event()

    def start(self) -> None:
        """Start the heartbeat thread; it joins as soon as it can."""
        self._thread = threading.Thread(
            target=self._run, name='affinity-member', daemon=True
        )
        self._thread.start()

    def stop(self, timeout: float = 10.0) -> None:
        """Leave the group and stop: other processes re-place our nodes
        at once instead of after the member timeout."""
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout)

    def hand_over(self) -> None:
        """Keep the entry alive until this process exits, without leaving.

        For a process about to be replaced straight away by another under
        the same name: the entry, with the latest capabilities, is there
        for the next one to take over, so nobody sees this member vanish.
        Beats go on (the thread is a daemon) until the process is gone;
        the entry expires a member timeout later if nobody takes it.
        """
        LOG.info(
            '%(role)s %(name)s is being replaced: keeping its entry for '
            'the next process under this name',
            {'role': self.role, 'name': self.name},
        )
        self._wake.set()

    def update(self, published: dict[str, object]) -> None:
        """Publish new capabilities (tags reloaded on SIGHUP, say)."""
        self._capabilities = published
        self._wake.set()

    def _run(self) -> None:
        while not self._stop.is_set():
            self._tick()
            self._wake.wait(self.heartbeat_interval)
            self._wake.clear()
        self._leave()

    def _tick(self) -> None:
        """One heartbeat, with its outage bookkeeping; never raises."""
        try:
            self._beat()
        except Exception as exc:  # noqa: BLE001 - keep beating
            self._failed(exc)
        else:
            self._recovered()

    def _beat(self) -> None:
        client = self._client()
        # Timed from before it is sent: the backend keeps the member for
        # the timeout from when it receives the beat, which is later.
        sent = self.lease.clock() if self.lease is not None else 0.0
        # Beat before joining: a reader that sees a member without a beat
        # takes it for dead (the Redis driver even deletes it).
        self._within(client, client.heartbeat)
        if self.lease is not None:
            self.lease.renewed(sent)
        # Bounded as the beat is: a hung listing would hold a stop.
        members = self._within(client, self._members)
        if self.name not in members:
            # A first join, or a join again after our entry was lost
            # (then what we published before still holds for us).
            wanted = self._wanted(self._published)
            self._join(wanted)
        elif self._published is None:
            # In the group before we ever joined: the entry of a previous
            # run under this name that has not expired yet. Our beats now
            # keep it alive, with our profile.
            wanted = self._wanted(
                self._entry() if self._compose is not None else {}
            )
            self._publish(wanted)
            LOG.info(
                '%(role)s %(name)s found its entry in group %(group)s, '
                'left by a previous run: taking the entry over',
                {
                    'role': self.role,
                    'name': self.name,
                    'group': self.group.decode(),
                },
            )
        else:
            wanted = self._wanted(self._published)
            if self._published != wanted:
                self._publish(wanted)
                LOG.log(
                    self._update_level,
                    'Published new capabilities of %(role)s %(name)s',
                    {'role': self.role.lower(), 'name': self.name},
                )
        self._published = wanted
        self.joined.set()

    def _wanted(self, previous: object | None) -> dict[str, object]:
        if self._compose is None:
            return self._capabilities
        return self._compose(previous, self._capabilities)

    def _entry(self) -> object:
        """What our entry in the group holds now."""
        assert self._coordinator is not None
        found = self._coordinator.get_member_capabilities(
            self.group, self.name.encode('utf-8')
        ).get(timeout=self.timeout)
        # Never None: None means joining to a compose function.
        return {} if found is None else found

    def _client(self) -> coordination.CoordinationDriver:
        """The started client, made and started first if need be."""
        if self._coordinator is None:
            self._coordinator = backend.coordinator(
                self.url, self.name, self.timeout
            )
        client = self._coordinator
        if not self._started:
            self._within(client, lambda: client.start(start_heart=False))
            self._started = True
        return client

    def _within(
        self,
        client: coordination.CoordinationDriver,
        call: Callable[[], T],
    ) -> T:
        """``call()`` on ``client``, given up after the call deadline.

        :raises: deadline.NoAnswer, the client then given up.
        """
        try:
            return deadline.call_within(
                self.call_deadline,
                call,
                lambda error: self._given_up(client, error),
            )
        except deadline.NoAnswer:
            # The call's thread is still inside the client, and discards
            # it when the call returns; from now on this thread must not
            # touch it. Not a leave: our entry, if the backend kept it,
            # is for the next client to carry on.
            self._coordinator = None
            self._started = False
            raise

    def _given_up(
        self,
        client: coordination.CoordinationDriver,
        error: BaseException | None,
    ) -> None:
        """In the call's thread, once a call given up on has returned."""
        if error is not None:
            # Often the only word of why the backend did not answer.
            LOG.warning(
                'A call of %(role)s %(name)s to the coordination backend '
                '%(url)s, given up after %(deadline)s s, failed since: '
                '%(error)s',
                {
                    'role': self.role.lower(),
                    'name': self.name,
                    'url': backend.redact(self.url),
                    'deadline': self.call_deadline,
                    'error': backend.describe(error, self.url),
                },
            )
        backend.discard(client)

    def _members(self) -> set[str]:
        assert self._coordinator is not None
        found = reading.member_names(
            self._coordinator, self.group, self.timeout
        )
        return found or set()

    def _join(self, wanted: dict[str, object]) -> None:
        assert self._coordinator is not None
        try:
            self._coordinator.create_group(self.group).get(
                timeout=self.timeout
            )
        except coordination.GroupAlreadyExist:
            pass
        try:
            self._coordinator.join_group(self.group, wanted).get(
                timeout=self.timeout
            )
        except coordination.MemberAlreadyExist:
            # Our name is taken by an entry we did not write: a previous
            # run of this conductor that died less than the member timeout
            # ago, or a second process started under the same name.
            LOG.warning(
                '%(role)s %(name)s is already in group %(group)s: another '
                'process with this name runs, or a previous one died less '
                'than %(timeout)s s ago. Taking the entry over.',
                {
                    'role': self.role,
                    'name': self.name,
                    'group': self.group.decode(),
                    'timeout': self.timeout,
                },
            )
            self._publish(wanted)
        else:
            LOG.info(
                '%(role)s %(name)s joined group %(group)s on %(url)s',
                {
                    'role': self.role,
                    'name': self.name,
                    'group': self.group.decode(),
                    'url': backend.redact(self.url),
                },
            )

    def _publish(self, wanted: dict[str, object]) -> None:
        assert self._coordinator is not None
        try:
            self._coordinator.update_capabilities(self.group, wanted).get(
                timeout=self.timeout
            )
        except tooz.NotImplemented:
            # The file driver cannot update in place: leave and join again,
            # which readers see as one change since both happen between
            # two of their reads or show as a brief absence.
            self._coordinator.leave_group(self.group).get(timeout=self.timeout)
            self._coordinator.join_group(self.group, wanted).get(
                timeout=self.timeout
            )

    def _failed(self, exc: Exception) -> None:
        self.joined.clear()
        if self._outage.duration() > self.timeout:
            # A long outage: start from a fresh client rather than trust
            # whatever state the old one was left in.
            self._reset()
        self._outage.failed(
            '%(role)s %(name)s cannot reach the coordination backend '
            '%(url)s: %(error)s. Retrying every %(interval)s s.',
            {
                'role': self.role,
                'name': self.name,
                'url': backend.redact(self.url),
                'error': backend.describe(exc, self.url),
                'interval': self.heartbeat_interval,
            },
        )

    def _recovered(self) -> None:
        self._outage.recovered(
            '%(role)s %(name)s reached the coordination backend again '
            'after %(seconds).1f s',
            {'role': self.role, 'name': self.name},
        )

    def _reset(self) -> None:
        # Not a leave: our entry, if the backend still has it, is for the
        # next client to take over (see backend.discard).
        if self._coordinator is not None and self._started:
            backend.discard(self._coordinator)
        self._coordinator = None
        self._started = False

    def _leave(self) -> None:
        # After a failed call, leaving would wait in vain; the entry expires.
        if self._started and self._coordinator and not self._outage.failing:
            try:
                self._coordinator.leave_group(self.group).get(
                    timeout=self.timeout
                )
                LOG.info(
                    '%(role)s %(name)s left the group',
                    {'role': self.role, 'name': self.name},
                )
            except Exception as exc:  # noqa: BLE001 - best effort on stop
                LOG.warning(
                    '%(role)s %(name)s could not leave the group cleanly '
                    '(%(error)s); it will expire in %(timeout)s s',
                    {
                        'role': self.role,
                        'name': self.name,
                        'error': backend.describe(exc, self.url),
                        'timeout': self.timeout,
                    },
                )
        self._reset()
        self.joined.clear()
