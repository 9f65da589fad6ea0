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

"""Conductors Ironic lists as active that the affinity group lacks.

Two such states are expected and brief: a conductor starting (it is in
the group before Ironic lists it, but a view reads the group only every
watch interval), and one that died (it leaves the group within the member
timeout, while Ironic lists it until its heartbeat timeout, 60 s by
default). Neither is an error. A conductor that stays listed but absent
for longer than that runs without the plugin or cannot reach the
coordination backend: then nodes are routed around it while it may work
nodes on its own, and that is worth an ERROR, once.
"""

from collections.abc import Callable
import time
from typing import Any

from ironic_affinity import outage

_MISSING = 'missing'
_LASTING = 'lasting'


class MissingMembers:
    """Tracks, names and times conductors missing from the group."""

    def __init__(
        self,
        log: Any,
        grace: Callable[[], float],
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """:param grace: seconds after which an absence is an error."""
        self._log = log
        self._grace = grace
        self._clock = clock
        # By name: "missing", then "lasting" past the grace. One line
        # names every conductor that changed at one observation.
        self._missing = outage.Conditions[str](log, clock)

    def lasting(self) -> frozenset[str]:
        """Those missing for longer than the grace."""
        return frozenset(
            name
            for name in self._missing.keys()
            if self._missing.state(name) == _LASTING
        )

    def observe(
        self,
        missing: frozenset[str],
        view_stale: bool,
        ironics_ring: bool = False,
    ) -> None:
        """Note who is missing now; log what changed.

        :param ironics_ring: Ironic's ring may route nodes to them: some
            or every node is on its side of a switch (adoption.rst).
        """
        if view_stale or ironics_ring:
            # The group cannot be read: its outage is logged where it is
            # read, and an absence now says nothing about the conductor.
            # Or Ironic's ring gives them nodes: nothing to say yet.
            return
        now = self._clock()
        back = {
            name
            for name in self._missing.keys() - missing
            if self._missing.cleared(name) == _LASTING
        }
        if back:
            self._log.info(
                'Conductor(s) %(names)s no longer active in Ironic without '
                'being in the affinity group',
                {'names': ', '.join(sorted(back))},
            )
        new = missing - self._missing.keys()
        for name in new:
            self._missing.raised(name, _MISSING)
        if new:
            self._log.info(
                'Conductor(s) %(names)s active in Ironic but not in the '
                'affinity group: no node is routed to them. Expected for a '
                'moment while a conductor starts, and until Ironic\'s '
                'heartbeat timeout after one stopped; an error follows if '
                'it lasts over %(grace).0f s.',
                {'names': ', '.join(sorted(new)), 'grace': self._grace()},
            )
        grace = self._grace()
        lasting = {
            name
            for name in missing
            if now - (self._missing.since(name) or 0.0) >= grace
            and self._missing.raised(name, _LASTING)
        }
        if lasting:
            self._log.error(
                'Conductor(s) %(names)s have been active in Ironic but not '
                'in the affinity group for over %(grace).0f s: they run '
                'without ironic-affinity, or cannot reach its coordination '
                'backend. No node is routed to them while this lasts, and '
                'they may work nodes this process routes elsewhere: run '
                'every conductor and API service with the same [affinity] '
                'settings.',
                {'names': ', '.join(sorted(lasting)), 'grace': grace},
            )
