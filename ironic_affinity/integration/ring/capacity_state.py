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

With any conductor's ``[affinity]max_nodes`` set, where a node goes
depends on every other node (:mod:`ironic_affinity.capacity`). Each
process already holds every node's facts (tags, hardware type, group) in
its tag cache, and every member's profile: it computes the whole
assignment from them, and answers lookups from it, so every process
gives the same answer with no more coordination than today.

When it is computed:

* for a new membership (a conductor joins, dies or changes its profile,
  or Ironic's active conductors change), before the first lookup
  answers: an assignment of another membership may name a dead
  conductor;
* when the nodes change (a node enrolled, deleted, or its tags, driver
  or group changed), at most once per ``[affinity]node_tags_interval``
  or five times as long as the previous computation took, whichever is
  longer, by the first lookup after that: lookups meanwhile answer from the
  previous one, and a node it does not hold, or holds with other facts,
  goes where :func:`capacity.place_newcomer` says, which every process
  says alike. A new node is so placed by its tags within about two
  intervals of its creation, and counted in every conductor's load
  within one more.

While a conductor's change rolls out (``[affinity]rebalance_period``),
the computation is of the rollout under capacity
(:mod:`ironic_affinity.rollout_capacity`): where each node was, where it
ends and when it moves; a lookup compares its clock with the node's
move, so no computation happens during the rollout but for the reasons
above.

Without any ``max_nodes``, nothing here runs: lookups are the engine's.
"""

from collections.abc import Callable
import dataclasses
import threading
import time
from typing import Any
from typing import Protocol

from ironic_affinity import capacity
from ironic_affinity import engine
from ironic_affinity import profile
from ironic_affinity import rollout
from ironic_affinity import rollout_capacity
from ironic_affinity.integration.data import node_tags as node_tags_module

# A computation for changed nodes waits at least this many times as long
# as the previous one took: at 100,000 nodes one takes 1 to 1.5 s
# (doc/source/contributor/capacity.rst), and while nodes are enrolled
# every process would otherwise spend most of a core on it.
COST_SHARE = 5


class TagCache(Protocol):
    """What this needs of a node tag cache."""

    version: int

    def nodes(self) -> list[tuple[str, node_tags_module.NodeFacts]]: ...

    def facts(self, uuid: str) -> node_tags_module.NodeFacts | None: ...


@dataclasses.dataclass(frozen=True, eq=False)
class Computed:
    """One assignment and what it was computed from."""

    placer: engine.PlacementEngine
    version: int
    at: float
    # How long it took.
    seconds: float
    facts: dict[str, node_tags_module.NodeFacts]
    # Where nodes end up: the placement of now.
    assignment: capacity.Assignment
    # While a change rolls out: where they are until they move.
    timeline: rollout_capacity.Timeline | None = None


class CapacityStates:
    """The latest assignment of each ring kind (with and without
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
        self._over: dict[str, int] = {}

    def current(
        self,
        placer: engine.PlacementEngine,
        use_groups: bool,
        paced: rollout.PacedPlacer | None = None,
    ) -> Computed | None:
        """The assignment to answer from, or None without capacity.

        :param paced: the rollout over ``placer``, while one is published.
        """
        if not capacity.is_limited(placer.conductors):
            return None
        return self._current(placer, use_groups, paced)

    def _current(
        self,
        placer: engine.PlacementEngine,
        use_groups: bool,
        paced: rollout.PacedPlacer | None,
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
            if (
                found is None
                or found.placer is not placer
                or found.version != self._tags.version
            ):
                found = self._compute(placer, use_groups, paced)
                self._latest[use_groups] = found
            return found

    def lookup(
        self,
        placer: engine.PlacementEngine,
        use_groups: bool,
        paced: rollout.PacedPlacer | None = None,
    ) -> Callable[[str, profile.NodeRequest], str | None] | None:
        """A ring's lookup under capacity over ``placer``'s members; None
        when none of them has a ``max_nodes``, checked once here rather
        than at every lookup.

        :param paced: the rollout over ``placer``, while one is published.
        """
        if not capacity.is_limited(placer.conductors):
            return None

        def conductor(uuid: str, node: profile.NodeRequest) -> str | None:
            return self.conductor(
                self._current(placer, use_groups, paced), uuid, node
            )

        return conductor

    def conductor(
        self,
        computed: Computed,
        uuid: str,
        node: profile.NodeRequest,
    ) -> str | None:
        """Where the node goes under ``computed``."""
        held = computed.facts.get(uuid)
        if held is not None and held == self._tags.facts(uuid):
            if computed.timeline is not None:
                return computed.timeline.conductor(uuid, self._wall_clock())
            return computed.assignment.conductors.get(uuid)
        return capacity.place_newcomer(
            computed.assignment, computed.placer, node
        )

    def _gap(self, found: Computed) -> float:
        """Seconds between two computations for changed nodes: the
        interval, or more for a long computation, so that a stream of
        node changes costs a process at most 1/COST_SHARE of a core."""
        return max(self._interval(), COST_SHARE * found.seconds)

    def _compute(
        self,
        placer: engine.PlacementEngine,
        use_groups: bool,
        paced: rollout.PacedPlacer | None,
    ) -> Computed:
        version = self._tags.version  # before the read: never newer
        nodes = self._tags.nodes()
        requests = node_tags_module.requests(nodes, use_groups)
        started = self._clock()
        timeline = None
        if paced is not None and paced.active(self._wall_clock()):
            timeline = rollout_capacity.build(paced, requests, self._pause)
            assignment = timeline.final
        else:
            assignment = capacity.assign(placer, requests, pause=self._pause)
        seconds = self._clock() - started
        self._log.debug(
            'Placement under capacity of %(count)d nodes computed in '
            '%(seconds).2f s: %(spilled)d spilled from a full first '
            'choice%(moves)s',
            {
                'count': len(nodes),
                'seconds': seconds,
                'spilled': len(assignment.spilled),
                'moves': ''
                if timeline is None
                else '; %d move(s) of a rollout' % len(timeline.moves),
            },
        )
        if use_groups:
            self._report(assignment)
        return Computed(
            placer,
            version,
            self._clock(),
            seconds,
            dict(nodes),
            assignment,
            timeline,
        )

    def _report(self, assignment: capacity.Assignment) -> None:
        """Log a change of who is over capacity, once per change."""
        over = assignment.over_capacity()
        if over == self._over:
            return
        self._over = over
        if over:
            self._log.warning(
                'Conductor(s) over [affinity]max_nodes, every conductor '
                'their nodes may use being full: %s',
                ', '.join(
                    '%s (%d nodes for max_nodes %d)'
                    % (
                        name,
                        assignment.loads[name],
                        assignment.capacities[name],
                    )
                    for name in sorted(over)
                ),
            )
        else:
            self._log.info('No conductor is over [affinity]max_nodes any more')
