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

Which reads count as "after an outage" is not this source's own
failures alone: a process may make no lookup while the database is
away (a conductor's periodic work fails earlier, on Ironic's own
queries), and then its first read after the return is its first sight
of the outage. So the source also asks when any reader sharing its
database engine last failed (the node tag cache reads or, where
another process reads the nodes, probes it every few seconds, whatever
the lookups): a read that succeeds after such a
failure, while the read before it predates the failure, is the first
read after an outage. An outage shorter than the tag cache's interval
may pass unseen; it cannot age a heartbeat past Ironic's timeout
unless the conductor was already late.

A conductor restarted after SIGUSR1 (Ironic keeps it registered) deletes
its hardware interfaces and writes them again at start, in two
transactions: a read between them lists it nowhere, and a ring built
from that read would move its nodes until the next one. A conductor
that the last read listed, and that Ironic still counts as live with no
hardware interface at all, is kept under what it ran. Both come from
one statement: read apart, a conductor could miss both, the first read
between its two writes and the second after them.
"""

from collections.abc import Callable
from collections.abc import Set
import math
import time
from typing import Any

from ironic_affinity import active_members
from ironic_affinity import outage


class ActiveConductorSource:
    """Reads the active conductors; answers the last read on failure."""

    def __init__(
        self,
        read: Callable[[], tuple[active_members.ActiveConductors, Set[str]]],
        log: Any,
        clock: Callable[[], float] = time.monotonic,
        recovery_grace: Callable[[], float] = lambda: 0.0,
        database_failed_at: Callable[[], float | None] = lambda: None,
    ) -> None:
        """:param read: the active conductors by key, and the conductors
            Ironic counts as live that list no hardware type, read at once.
        :param recovery_grace: seconds after an outage during which the
            conductors of before it are kept (read at each recovery).
        :param database_failed_at: ``clock()`` of the last failure of any
            reader of the same database, or None.
        """
        self._read = read
        self._log = log
        self._clock = clock
        self._recovery_grace = recovery_grace
        self._database_failed_at = database_failed_at
        self._last: dict[str, frozenset[str]] | None = None
        # clock() of the last successful read and of our last failed one.
        self._last_at = 0.0
        self._failed_at: float | None = None
        # The conductors of before the outage, and until when they stay.
        self._kept: dict[str, frozenset[str]] = {}
        self._kept_until = 0.0
        self.outage = outage.Outage(log, clock)

    def __call__(self) -> dict[str, frozenset[str]]:
        try:
            found = self._through_registration(*self._read())
        except Exception as exc:
            if self._last is None:
                raise
            self._failed_at = self._clock()
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
        now = self._clock()
        fresh = {key: frozenset(hosts) for key, hosts in found.items()}
        self.outage.recovered(
            'Active conductors readable again after %(seconds).1f s', {}
        )
        if self._last is not None and self._last_at <= self._failed_since():
            # The first read since the database failed: what we read
            # before it is what the heartbeats will say again shortly.
            self._kept = self._last
            self._kept_until = now + self._recovery_grace()
        if self._kept and now < self._kept_until:
            for key, hosts in self._kept.items():
                fresh[key] = fresh.get(key, frozenset()) | hosts
        else:
            self._kept = {}
        self._last = fresh
        self._last_at = now
        return self._last

    def _failed_since(self) -> float:
        """clock() of the latest failure seen by us or a sibling reader;
        minus infinity if none."""
        times = [self._failed_at, self._database_failed_at()]
        return max((t for t in times if t is not None), default=-math.inf)

    def _through_registration(
        self, found: active_members.ActiveConductors, registering: Set[str]
    ) -> active_members.ActiveConductors:
        """``found``, with the conductors the last read listed that are
        registering again added back under their keys of that read."""
        if self._last is None:
            return found
        listed = set().union(*found.values())
        gone = set().union(*self._last.values()) - listed
        if not gone:
            return found
        back = gone & registering
        if not back:
            return found
        self._log.debug(
            'Conductor(s) %s registering with Ironic again: kept with '
            'what they ran.',
            ', '.join(sorted(back)),
        )
        merged = dict(found)
        for key, hosts in self._last.items():
            if hosts & back:
                merged[key] = frozenset(merged.get(key, ())) | (hosts & back)
        return merged
