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

"""Where a node goes: the one place that decides it.

Four ways to place exist, and which one applies is decided here alone,
from the conductors' published profiles and the moment:

* *plain*: the engine's rule (:mod:`ironic_affinity.engine`);
* *paced*: while a conductor's change rolls out, each node follows it at
  its own moment (:mod:`ironic_affinity.rollout`);
* *under capacity*: with any ``max_nodes``, a node's conductor depends on
  the other nodes (:mod:`ironic_affinity.capacity`);
* *paced under capacity*: both (:mod:`ironic_affinity.rollout_capacity`).

The ring (one node at a time, on every lookup), ``plan``, ``explain``,
``check``, the affinity API and the metrics all ask a :class:`Placement`:
none of them builds an engine, a rollout or an assignment itself, so
what ``explain`` says is what a ring does.

Under capacity the answer for one node needs every node: a caller first
*settles* the node set (:meth:`Placement.settle`, the costly part, which
a process keeps until its nodes or members change), then asks per node.
A node the settled set does not hold (just enrolled, or its tags just
changed) goes where :func:`capacity.place_newcomer` says, as every
process says alike.

Pure: no I/O, no configuration; the moment is an argument (seconds since
the epoch, as conductors publish their changes; None ignores changes).
"""

from collections.abc import Callable
from collections.abc import Iterable
from collections.abc import Mapping
from collections.abc import Sequence
import dataclasses

from ironic_affinity import capacity
from ironic_affinity import engine
from ironic_affinity import profile
from ironic_affinity import rollout
from ironic_affinity import rollout_capacity
from ironic_affinity import schedule


@dataclasses.dataclass(frozen=True)
class NodeAnswer:
    """Where one node is at one moment, and why."""

    node: str
    # Where it is now; None when no conductor may take it.
    conductor: str | None
    # ``conductor``'s score by the node's tags of now.
    score: int | None
    # The conductors sharing the top score by the profiles of now.
    tied: tuple[str, ...]
    # Where it ends once every change has rolled out.
    final: str | None
    # Its first choice, when it is elsewhere because that one is full.
    spilled_from: str | None = None
    # Placed beyond its conductor's capacity: every way out was full.
    over_capacity: bool = False
    # Its moves still to come, in order; () when none is.
    pending: tuple[schedule.Move[str | None], ...] = ()


@dataclasses.dataclass(frozen=True)
class Settled:
    """A node set placed under capacity: what lookups answer from."""

    # Where nodes end up: the placement of now.
    assignment: capacity.Assignment
    # While a change rolls out: where they are until they move.
    timeline: rollout_capacity.Timeline | None = None

    def holds(self, name: str) -> bool:
        return name in self.assignment.conductors

    def loads(self, now: float | None) -> Mapping[str, int]:
        """Nodes on each conductor at ``now``."""
        if self.timeline is not None and now is not None:
            return self.timeline.loads(now)
        return self.assignment.loads


class Placement:
    """Places nodes over one membership: the live conductors, each with
    its published changes and capacity.

    Built once per membership and shared by every lookup until the
    members change; everything it remembers comes from them.
    """

    def __init__(self, conductors: Iterable[profile.ConductorProfile]):
        self.engine = engine.PlacementEngine(conductors)
        self.limited = capacity.is_limited(self.engine.conductors)
        self._rollout = (
            rollout.PacedPlacer(self.engine)
            if any(c.changes for c in self.engine.conductors)
            else None
        )

    @property
    def conductors(self) -> tuple[profile.ConductorProfile, ...]:
        return self.engine.conductors

    @property
    def timed(self) -> bool:
        """Whether an answer may depend on the moment: a caller that
        answers often reads its clock only then."""
        return self._rollout is not None

    def rolling(self, now: float | None) -> rollout.PacedPlacer | None:
        """The rollout under way at ``now``, if any."""
        found = self._rollout
        if found is None or now is None or not found.active(now):
            return None
        return found

    def settle(
        self,
        nodes: Sequence[profile.NodeRequest],
        now: float | None,
        pause: Callable[[], None] | None = None,
    ) -> Settled | None:
        """Place the whole node set, when a node's conductor depends on
        the others (any ``max_nodes``); None otherwise.

        :param pause: as for :func:`capacity.assign`.
        """
        if not self.limited:
            return None
        paced = self.rolling(now)
        if paced is not None:
            timeline = rollout_capacity.build(paced, nodes, pause)
            return Settled(timeline.final, timeline)
        return Settled(capacity.assign(self.engine, nodes, pause))

    def evaluate(self, node: profile.NodeRequest) -> engine.Evaluation:
        """Every conductor's verdict for the node, by the profiles of
        now."""
        return self.engine.evaluate(node)

    def conductor(
        self,
        node: profile.NodeRequest,
        now: float | None,
        settled: Settled | None = None,
        held: bool | None = None,
    ) -> str | None:
        """The node's conductor at ``now``: the ring's fast path.

        :param settled: this placement's :meth:`settle` of the node set,
            required under capacity.
        :param held: whether ``settled`` holds the node as it is now;
            None looks it up by name.
        """
        if self.limited:
            assert settled is not None, 'settle() the nodes first'
            if held is None:
                held = settled.holds(node.name)
            if not held:
                return capacity.place_newcomer(
                    settled.assignment, self.engine, node
                )
            if settled.timeline is not None and now is not None:
                return settled.timeline.conductor(node.name, now)
            return settled.assignment.conductors.get(node.name)
        paced = self.rolling(now)
        if paced is not None:
            assert now is not None
            return paced.conductor(node, now)
        return self.engine.place(node).conductor

    def fallback_order(
        self,
        node: profile.NodeRequest,
        now: float | None,
        settled: Settled | None = None,
        held: bool | None = None,
    ) -> tuple[str, ...]:
        """The node's conductor at ``now``, then who takes it if that one
        dies, and so on: a move forced by a death goes straight to where
        the node will end up."""
        paced = None if self.limited else self.rolling(now)
        if paced is not None:
            assert now is not None
            return paced.fallback_order(node, now)
        order = self.engine.fallback_order(node)
        if not self.limited:
            return order
        first = self.conductor(node, now, settled, held)
        if first is None:
            return order
        return (first,) + tuple(c for c in order if c != first)

    def preferences(self, node: profile.NodeRequest) -> tuple[str, ...]:
        """Every conductor that may take the node, best first, by the
        profiles of now, whatever the moment or the other nodes: what
        ``explain`` shows as the fallback order under capacity."""
        return self.engine.fallback_order(node)

    def answer_all(
        self,
        nodes: Sequence[profile.NodeRequest],
        now: float | None,
        settled: Settled | None = None,
        moves: bool = True,
    ) -> list[NodeAnswer]:
        """Every node's answer, in the order given, many at once.

        :param settled: this placement's :meth:`settle` of ``nodes``;
            settled here when not given.
        :param moves: whether to list each node's pending moves; a
            caller that counts where nodes are (the metrics, under a
            rollout) spares itself a placement per moment and node.
        """
        if self.limited and settled is None:
            settled = self.settle(nodes, now)
        first = self.engine.place_all(nodes)
        paced = self.rolling(now)
        answers = []
        for node, placement in zip(nodes, first, strict=True):
            answers.append(
                self._answer(node, placement, now, paced, settled, moves)
            )
        return answers

    def answer(
        self,
        node: profile.NodeRequest,
        now: float | None,
        settled: Settled | None = None,
    ) -> NodeAnswer:
        """One node's answer.

        :param settled: under capacity, the settled node set; the node
            alone when not given.
        """
        if self.limited and settled is None:
            settled = self.settle([node], now)
        return self._answer(
            node, self.engine.place(node), now, self.rolling(now), settled
        )

    def _answer(
        self,
        node: profile.NodeRequest,
        placement: engine.Choice,
        now: float | None,
        paced: rollout.PacedPlacer | None,
        settled: Settled | None,
        moves: bool = True,
    ) -> NodeAnswer:
        final = placement.conductor
        spilled_from = None
        over = False
        pending: tuple[schedule.Move[str | None], ...] = ()
        if settled is not None:
            holder = self.conductor(node, now, settled)
            if settled.holds(node.name):
                final = settled.assignment.conductors[node.name]
                if settled.timeline is not None and now is not None:
                    pending = tuple(settled.timeline.pending(node.name, now))
                if not pending:
                    spilled_from = settled.assignment.spilled.get(node.name)
                over = node.name in settled.assignment.overflow
            else:
                final = holder
        elif paced is not None:
            assert now is not None
            holder = paced.conductor(node, now)
            if moves and paced.stages(node, now):
                pending = tuple(paced.pending(node, now))
        else:
            holder = final
        score = placement.score
        if holder != placement.conductor:
            score = self._score(node, holder)
        return NodeAnswer(
            node=node.name,
            conductor=holder,
            score=score,
            tied=placement.tied,
            final=final,
            spilled_from=spilled_from,
            over_capacity=over,
            pending=pending,
        )

    def _score(
        self, node: profile.NodeRequest, holder: str | None
    ) -> int | None:
        """The score of the conductor a node is on, by its tags of now."""
        for verdict in self.evaluate(node).verdicts:
            if verdict.conductor == holder:
                return verdict.score
        return None
