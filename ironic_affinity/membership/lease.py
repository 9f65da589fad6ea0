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

"""A conductor's membership as a lease, seen from the conductor itself.

The backend keeps a member for the member timeout after each heartbeat
it receives; then every other process drops it and re-places its nodes.
A conductor cut off from the backend (its network to Redis, say) cannot
learn that it was dropped, and its last view still places those nodes
on itself: two conductors would work them. So a conductor counts its
own lease: it runs out ``margin`` seconds before the backend's can, timed
from when the last acknowledged heartbeat was *sent*, which is no later
than the backend received it. Once it has run out, the conductor places
nodes as the others do without it (membership/view.py), until a
heartbeat is acknowledged again and a read of the group begun after that
heartbeat shows it back in.

One conductor runs in a process, so the process has one lease at most:
:func:`own` is what its member view asks.
"""

from collections.abc import Callable
import threading
import time
from typing import Any

from ironic_affinity import exception
from ironic_affinity import outage
from ironic_affinity._i18n import _


def margin_for(timeout: float, heartbeat_interval: float) -> float:
    """Seconds the lease runs out before the backend drops the member.

    One heartbeat interval and a second: a lookup made just before the
    lease runs out may start work that lasts a moment, and the others
    read the group only every watch interval anyway. At most half the
    timeout, so that a short timeout still leaves a lease.

    :raises: InvalidTimers when the lease would not outlast the time
        between two heartbeats (a timeout of twice the interval or less):
        the conductor would stand down at every heartbeat.
    """
    margin = min(heartbeat_interval + 1.0, timeout / 2.0)
    if timeout - margin <= heartbeat_interval:
        raise exception.InvalidTimers(
            _(
                '[affinity]member_timeout (%(timeout)s s) must be more than '
                'twice [affinity]heartbeat_interval (%(interval)s s): the '
                "conductor's lease, %(lease)s s after each acknowledged "
                'heartbeat, would run out before its next heartbeat'
            )
            % {
                'timeout': timeout,
                'interval': heartbeat_interval,
                'lease': timeout - margin,
            }
        )
    return margin


class Lease:
    """This conductor's membership as long as the backend may hold it."""

    def __init__(
        self,
        name: str,
        timeout: float,
        margin: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """:param name: the member's name in the group.
        :param timeout: the member timeout.
        :param margin: how much earlier than the backend it runs out.
        """
        self.name = name
        self.timeout = timeout
        self.margin = margin
        #: What the lease is timed on (monotonic seconds).
        self.clock = clock
        self._lock = threading.Lock()
        # When the last acknowledged heartbeat was sent; None before one.
        self._sent: float | None = None
        #: When the heartbeat that started the current lease was sent:
        #: the first one, or the first after the lease had run out.
        self.resumed_at: float | None = None

    def renewed(self, sent_at: float) -> None:
        """The heartbeat sent at ``sent_at`` was acknowledged."""
        with self._lock:
            if self._sent is None or self._ran_out(sent_at):
                self.resumed_at = sent_at
            if self._sent is None or sent_at > self._sent:
                self._sent = sent_at

    def end(self) -> None:
        """The member is leaving the group: the lease ends now, before
        the others re-place its nodes."""
        with self._lock:
            self._sent = None

    def lapsed(self) -> bool:
        """Whether the lease has run out (or never started): the others
        have dropped this member, or may do so any moment."""
        sent = self._sent
        return sent is None or self.clock() >= self.expires_at(sent)

    def expires_at(self, sent: float) -> float:
        return sent + self.timeout - self.margin

    def age(self) -> float | None:
        """Seconds since the last acknowledged heartbeat was sent."""
        sent = self._sent
        return None if sent is None else self.clock() - sent

    def _ran_out(self, at: float) -> bool:
        assert self._sent is not None
        return at >= self.expires_at(self._sent)


_OWN: Lease | None = None


def own() -> Lease | None:
    """This process's lease: its conductor's, or None (an API process,
    or a conductor not running the plugin's membership)."""
    return _OWN


def set_own(found: Lease | None) -> None:
    global _OWN
    _OWN = found


def counts_itself(own: Lease, read_started: float) -> bool:
    """Whether a read begun at ``read_started`` that shows this
    conductor may place nodes on it: only within its lease, and only a
    read begun after the heartbeat that started the lease, so that a view
    read before a heal does not bring it back early."""
    return (
        not own.lapsed()
        and own.resumed_at is not None
        and read_started >= own.resumed_at
    )


class StandDowns:
    """Says once when this conductor stands down, once when it is back."""

    def __init__(self, log: Any, clock: Callable[[], float]) -> None:
        """:param log: the logger of the view that leaves it out."""
        self._log = log
        self._stood_down = outage.Conditions[bool](log, clock)

    def note(self, own: Lease, counted: bool) -> None:
        """The view counts this conductor, or leaves it out."""
        if counted:
            self._stood_down.cleared(
                True,
                'Conductor %(name)s is back in the affinity group: it '
                'places its nodes on itself again',
                {'name': own.name},
            )
            return
        if not self._stood_down.raised(True, True):
            return
        age = own.age()
        if age is None:
            return  # starting or stopping: no lease is news
        self._log.warning(
            'Conductor %(name)s has had no heartbeat acknowledged by the '
            'coordination backend for %(age)s: the other processes may '
            'drop it %(margin).1f s from now. Standing down: it places '
            'nodes as '
            'they do without it, and works none in periodic tasks, until '
            'a heartbeat is acknowledged and it is seen in the group '
            'again.',
            {
                'name': own.name,
                'age': '%.1f s' % age,
                'margin': own.margin,
            },
        )
