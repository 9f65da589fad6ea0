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

"""Ironic's active conductors, kept through a database outage.

Ironic's own ring manager fails every lookup while the database is away
(a restart, a failover). Ours keeps the conductors it last read: the
membership group still takes a dead one out, so placement stays right,
and no node request fails for a database blip that Ironic itself would
survive. Before the first successful read there is nothing to keep, and
the error is Ironic's to see.

When the database is back, the conductors' last heartbeats are as old as
the outage: Ironic counts each of them dead until it beats again, within
its heartbeat interval (a little later on a loaded host). So for one
recovery grace (the ring manager gives Ironic's heartbeat timeout) the
conductors of before the outage are kept beside those read, and a node
of theirs is not refused in that moment; one that died meanwhile has
left the membership group, which still takes it out.
"""

from collections.abc import Callable
import time
from typing import Any

from ironic_affinity import active_members
from ironic_affinity import outage


class ActiveConductorSource:
    """Reads the active conductors; answers the last read on failure."""

    def __init__(
        self,
        read: Callable[[], active_members.ActiveConductors],
        log: Any,
        clock: Callable[[], float] = time.monotonic,
        recovery_grace: Callable[[], float] = lambda: 0.0,
    ) -> None:
        """:param recovery_grace: seconds after an outage during which the
        conductors of before it are kept (read at each recovery)."""
        self._read = read
        self._log = log
        self._clock = clock
        self._recovery_grace = recovery_grace
        self._last: dict[str, frozenset[str]] | None = None
        # The conductors of before the outage, and until when they stay.
        self._kept: dict[str, frozenset[str]] = {}
        self._kept_until = 0.0
        self.outage = outage.Outage(log, clock)

    def __call__(self) -> dict[str, frozenset[str]]:
        try:
            found = self._read()
        except Exception as exc:
            if self._last is None:
                raise
            self.outage.failed(
                'Cannot read the active conductors from the database '
                '(%(error)s); placing over the %(count)d last seen until '
                'it answers again.',
                {
                    'error': exc,
                    'count': len(set().union(*self._last.values())),
                },
            )
            return self._last
        fresh = {key: frozenset(hosts) for key, hosts in found.items()}
        if self.outage.recovered(
            'Active conductors readable again after %(seconds).1f s', {}
        ):
            self._kept = self._last or {}
            self._kept_until = self._clock() + self._recovery_grace()
        if self._kept and self._clock() < self._kept_until:
            for key, hosts in self._kept.items():
                fresh[key] = fresh.get(key, frozenset()) | hosts
        else:
            self._kept = {}
        self._last = fresh
        return self._last
