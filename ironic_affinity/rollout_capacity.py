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

"""Gradual rebalancing under capacity: each node moves once, at its turn.

With any conductor's ``max_nodes`` set, where a node goes depends on
every other node (:mod:`ironic_affinity.capacity`), so a node cannot
follow a change on its own as :mod:`ironic_affinity.rollout` has it: a
node moving in at its moment may find its conductor full until another
moves out at a later one. Placing every node over the profiles it sees
at each moment was tried and rejected: the set of nodes competing for a
conductor changes both ways as nodes pass their shares, and in a
300-node test some nodes moved back and forth twelve times.

Instead, a rollout under capacity goes from one placement to another:

* *start*: the placement under capacity over the profiles before the
  changes under way (each changing conductor as before its oldest
  change; a joining one absent), with the capacities of now;
* *final*: the placement under capacity over the profiles of now.

A node placed alike in both never moves. Any other moves once, from its
start to its final conductor, at its *turn*: for each changing
conductor among the two (or among all, if neither changes), the moment
it passes its share of that conductor's changes (the earliest, if
several), as the rollout has it. Moves are replayed in order of turn,
so that capacity holds at every moment: when a move finds its final
conductor full, the node there that leaves it at the earliest turn
leaves now, and so on along the chain. Moves that must happen go first,
at once: a node whose start conductor now excludes it (hard tags, group,
hardware types) or had no conductor at the start.

Every process computes the same moves from the published profiles,
with no grid and no further message: a lookup compares the clock with
the node's turn. Two placements under capacity are computed instead of
one, when the members or the nodes change, not at each lookup.

What this gives up against the rollout without capacity: a node moves
straight to where it ends, not through each change in turn; a second
change of a conductor brings forward nodes still to move, and moves at
once a node that followed the first change and that the second one
sends elsewhere.
"""

from collections.abc import Callable
from collections.abc import Mapping
from collections.abc import Sequence
import dataclasses
import heapq
import math

from ironic_affinity import capacity
from ironic_affinity import engine
from ironic_affinity import profile
from ironic_affinity import rendezvous
from ironic_affinity import rollout
from ironic_affinity import schedule


@dataclasses.dataclass(frozen=True)
class Timeline:
    """Where every node of one node set is at any moment of a rollout
    under capacity."""

    start: capacity.Assignment
    final: capacity.Assignment
    # Node name -> its one move; -inf for a move made at once.
    moves: Mapping[str, schedule.Move[str | None]]

    def conductor(self, name: str, now: float) -> str | None:
        """The node's conductor at ``now``: a node this timeline does not
        hold is None."""
        move = self.moves.get(name)
        if move is not None and now >= move.at:
            return move.target
        return self.start.conductors.get(name)

    def loads(self, now: float) -> dict[str, int]:
        """Nodes on each conductor at ``now``."""
        counts = dict(self.final.loads)
        for move in self.moves.values():
            if now < move.at:
                for name, step in ((move.target, -1), (move.source, 1)):
                    if name is not None:
                        counts[name] += step
        return counts

    def pending(
        self, name: str, now: float
    ) -> list[schedule.Move[str | None]]:
        """The node's move still to come, if any."""
        move = self.moves.get(name)
        return [move] if move is not None and move.at > now else []


def _before(
    placer: rollout.PacedPlacer,
) -> engine.PlacementEngine:
    """The conductors as before their oldest unfinished change, with the
    capacities of now."""
    found = []
    for conductor in placer.current.conductors:
        seen = rollout.profile_at(conductor, 0)
        if seen is not None:
            found.append(
                dataclasses.replace(seen, max_nodes=conductor.max_nodes)
            )
    return engine.PlacementEngine(found)


def _turn(
    node: profile.NodeRequest, involved: Sequence[schedule.Schedule]
) -> float:
    """When the node follows the first of these conductors' changes."""
    key = rendezvous.hash64(node.hash_key)
    return min(
        paced.moment(key, index, node.created_at)
        for paced in involved
        for index in range(len(paced.changes))
    )


def build(
    placer: rollout.PacedPlacer,
    nodes: Sequence[profile.NodeRequest],
    pause: Callable[[], None] | None = None,
) -> Timeline:
    """The rollout of ``placer``'s changes under capacity, for ``nodes``.

    :param pause: as for :func:`capacity.assign`.
    """
    current = placer.current
    start = capacity.assign(_before(placer), nodes, pause)
    final = capacity.assign(current, nodes, pause)
    # Each changing conductor's changes, hashed once for every node.
    changing = {c.name: rollout.schedule_of(c) for c in placer.rolling}
    # By the nodes' names: when each moves, first those that must.
    turns: dict[str, float] = {}
    for index, node in enumerate(nodes):
        if pause is not None and index % capacity.PAUSE_EVERY == 0:
            pause()
        source = start.conductors[node.name]
        target = final.conductors[node.name]
        if source == target:
            continue
        if source is None or source not in placer.eligible_now(node):
            turns[node.name] = -math.inf
            continue
        involved = [changing[c] for c in (source, target) if c in changing]
        turns[node.name] = _turn(node, involved or list(changing.values()))
    return Timeline(start, final, _replay(start, final, turns))


def _replay(
    start: capacity.Assignment,
    final: capacity.Assignment,
    turns: Mapping[str, float],
) -> dict[str, schedule.Move[str | None]]:
    """Each move at its turn, or earlier when a node arriving at a full
    conductor needs the place of one leaving it."""
    # Every conductor of now: a joining one holds nothing at the start.
    loads = {name: start.loads.get(name, 0) for name in final.loads}
    # What each conductor may hold along the way: its capacity, or what
    # it holds at the end when every conductor its nodes may use is full.
    room = {
        name: max(limit, final.loads[name])
        for name, limit in final.capacities.items()
        if limit
    }
    # By conductor, the nodes still to leave it, earliest turn first.
    leaving: dict[str, list[tuple[float, str]]] = {}
    for name, turn in turns.items():
        source = start.conductors[name]
        if source is not None:
            leaving.setdefault(source, []).append((turn, name))
    for queue in leaving.values():
        heapq.heapify(queue)
    moves: dict[str, schedule.Move[str | None]] = {}

    def move(name: str, at: float) -> None:
        chain = [name]
        while chain:
            node = chain.pop()
            if node in moves:
                continue
            source = start.conductors[node]
            target = final.conductors[node]
            moves[node] = schedule.Move(at, source, target)
            if source is not None:
                loads[source] -= 1
            if target is not None:
                loads[target] += 1
            if target not in room:  # None, or no capacity
                continue
            queue = leaving.get(target, [])
            while loads[target] > room[target] and queue:
                _turn_of, other = heapq.heappop(queue)
                if other not in moves:
                    # Leaves now: its place is needed.
                    chain.append(other)
                    break

    # Over capacity at the start (a capacity lowered): leave at once.
    for name, limit in room.items():
        queue = leaving.get(name, [])
        while loads[name] > limit and queue:
            move(heapq.heappop(queue)[1], -math.inf)
    for name, turn in sorted(turns.items(), key=lambda item: item[::-1]):
        move(name, turn)
    return moves
