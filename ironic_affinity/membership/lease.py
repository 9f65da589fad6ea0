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


def margin_for(timeout: float, heartbeat_interval: float) -> float:
    """Seconds the lease runs out before the backend drops the member.

    One heartbeat interval and a second: a lookup made just before the
    lease runs out may start work that lasts a moment, and the others
    read the group only every watch interval anyway. At most half the
    timeout, so that a short timeout still leaves a lease.
    """
    return min(heartbeat_interval + 1.0, timeout / 2.0)


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
