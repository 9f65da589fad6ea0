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

"""A process's placement under capacity, kept over its node tag cache.

With any ``[affinity]max_nodes``, where a node goes depends on every
other node; each process computes the whole assignment from the facts
and profiles it holds, so every process answers alike. What is computed,
and how a lookup answers from it, is :mod:`ironic_affinity.placement`'s:
this module decides when to compute (for a new membership before the
first lookup answers; for changed nodes at most once per
``node_tags_interval`` or five computations' time), and whether a
computation holds a node as it is now. Why, with the figures:
doc/source/contributor/capacity.rst. Without any ``max_nodes``, nothing
here runs.
"""

from collections.abc import Callable
import dataclasses
import threading
import time
from typing import Any
from typing import Protocol

from ironic_affinity import capacity
from ironic_affinity import outage
from ironic_affinity import placement
from ironic_affinity.integration.node_tags import node_facts

# A computation for changed nodes waits at least this many times as long
# as the previous one took: at 100,000 nodes one takes 1 to 1.5 s
# (doc/source/contributor/capacity.rst), and while nodes are enrolled
# every process would otherwise spend most of a core on it.
COST_SHARE = 5

#: The settled node set to answer a node from, and whether it holds the
#: node as it is now: uuid -> (settled, held).
SettledLookup = Callable[[str], tuple[placement.Settled, bool]]


class TagCache(Protocol):
    """What this needs of a node tag cache."""

    version: int

    def nodes(self) -> list[tuple[str, node_facts.NodeFacts]]: ...

    def facts(self, uuid: str) -> node_facts.NodeFacts | None: ...


@dataclasses.dataclass(frozen=True, eq=False)
class Computed:
    """One settled node set and what it was computed from."""

    placer: placement.Placement
    version: int
    at: float
    # How long it took.
    seconds: float
    facts: dict[str, node_facts.NodeFacts]
    settled: placement.Settled


class CapacityStates:
    """The latest settled node set of each ring kind (with and without
    groups), recomputed as the module's docstring says."""

    def __init__(
        self,
        tags: TagCache,
        interval: Callable[[], float],
        log: Any,
        clock: Callable[[], float] = time.monotonic,
        pause: Callable[[], None] = lambda: time.sleep(0),
        wall_clock: Callable[[], float] = time.time,
    ) -> None:
        """:param tags: the process's node tag cache.
        :param interval: seconds between two computations for changed
            nodes (``[affinity]node_tags_interval``).
        :param pause: lets other threads run during a computation: under
            eventlet (Ironic 29) it is a green thread, which holds the
            whole process until it yields.
        :param wall_clock: seconds since the epoch, as conductors
            publish their changes.
        """
        self._tags = tags
        self._interval = interval
        self._log = log
        self._clock = clock
        self._pause = pause
        self._wall_clock = wall_clock
        self._lock = threading.Lock()
        self._latest: dict[bool, Computed] = {}
        self._over = outage.Conditions[str](log)

    def current(
        self, placer: placement.Placement, use_groups: bool
    ) -> Computed | None:
        """The computation to answer from, or None without capacity."""
        if not placer.limited:
            return None
        return self._current(placer, use_groups)

    def _current(
        self, placer: placement.Placement, use_groups: bool
    ) -> Computed:
        found = self._latest.get(use_groups)
        if found is not None and found.placer is placer:
            if found.version == self._tags.version or (
                self._clock() - found.at < self._gap(found)
            ):
                return found
            if self._lock.locked():
                # Another thread is computing the next one: the nodes
                # changed, not the members, so this one stays valid.
                return found
        with self._lock:
            found = self._latest.get(use_groups)
            why = None
            if found is None or found.placer is not placer:
                why = 'a new membership'
            elif found.version != self._tags.version:
                why = 'changed nodes'
            if why is not None:
                found = self._compute(placer, use_groups, why)
                self._latest[use_groups] = found
            assert found is not None
            return found

    def lookup(
        self, placer: placement.Placement, use_groups: bool
    ) -> SettledLookup | None:
        """A ring's source of settled node sets over ``placer``'s
        members; None when none of them has a ``max_nodes``, checked
        once here rather than at every lookup."""
        if not placer.limited:
            return None

        def settled(uuid: str) -> tuple[placement.Settled, bool]:
            computed = self._current(placer, use_groups)
            return computed.settled, self.holds(computed, uuid)

        return settled

    def holds(self, computed: Computed, uuid: str) -> bool:
        """Whether ``computed`` holds the node with its facts of now."""
        held = computed.facts.get(uuid)
        return held is not None and held == self._tags.facts(uuid)

    def _gap(self, found: Computed) -> float:
        """Seconds between two computations for changed nodes: the
        interval, or more for a long computation, so that a stream of
        node changes costs a process at most 1/COST_SHARE of a core."""
        return max(self._interval(), COST_SHARE * found.seconds)

    def _compute(
        self, placer: placement.Placement, use_groups: bool, why: str
    ) -> Computed:
        version = self._tags.version  # before the read: never newer
        nodes = self._tags.nodes()
        requests = node_facts.requests(nodes, use_groups)
        started = self._clock()
        settled = placer.settle(requests, self._wall_clock(), self._pause)
        assert settled is not None  # limited: see current()
        seconds = self._clock() - started
        assignment = settled.assignment
        self._log.debug(
            'Placement under capacity of %(count)d nodes computed for '
            '%(why)s in %(seconds).2f s: %(spilled)d spilled from a full '
            'first choice%(moves)s',
            {
                'why': why,
                'count': len(nodes),
                'seconds': seconds,
                'spilled': len(assignment.spilled),
                'moves': ''
                if settled.timeline is None
                else '; %d move(s) of a rollout' % len(settled.timeline.moves),
            },
        )
        if use_groups:
            self._report(assignment)
        return Computed(
            placer, version, self._clock(), seconds, dict(nodes), settled
        )

    def _report(self, assignment: capacity.Assignment) -> None:
        """Log a change of who is over capacity, once per change."""
        over = assignment.over_capacity()
        if not over:
            self._over.cleared(
                'over', 'No conductor is over [affinity]max_nodes any more'
            )
            return
        self._over.raised(
            'over',
            tuple(over.items()),
            'Conductor(s) over [affinity]max_nodes, every conductor '
            'their nodes may use being full: %(over)s',
            {
                'over': ', '.join(
                    '%s (%d nodes for max_nodes %d)'
                    % (
                        name,
                        assignment.loads[name],
                        assignment.capacities[name],
                    )
                    for name in sorted(over)
                )
            },
        )
