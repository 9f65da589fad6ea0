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

"""Placement under conductor capacity (``max_nodes``): bounded loads.

The engine sends each node to the first conductor of its fallback order.
With soft tags and uneven racks that can give one conductor every node
while its peers sit idle. Here, when any conductor has a capacity, the
rule becomes: each node takes the first conductor of its fallback order
that has room. When none has, it takes its first choice anyway, so
capacity never orphans a node, and that conductor is reported over
capacity. Hard constraints are the engine's and are never relaxed.

Who has room depends on which nodes came first, so nodes are taken in
one canonical order that any process computes alike from the node set
alone, whatever order it was listed in:

1. nodes with fewer eligible conductors first: they have fewer ways out,
   and must not find their only conductors filled by nodes that had
   others;
2. then by the 64-bit hash of the node's key, the one rendezvous hashing
   uses, so the order is a fair random draw that no node name biases.

This is consistent hashing with bounded loads (Mirrokni, Thorup and
Zadimoghaddam, SODA 2018) with each node's rendezvous fallback order as
its probe sequence. The paper shows that with capacities (1+e) times the
fair share an insertion or a removal moves O(1/e^2) other nodes in
expectation; tools/benchmark_capacity.py measures ours.

With no capacity set the result is the engine's, computed as before.
"""

from collections.abc import Mapping
from collections.abc import Sequence
import dataclasses

from ironic_affinity import engine
from ironic_affinity import profile
from ironic_affinity import rendezvous
from ironic_affinity._i18n import _


@dataclasses.dataclass(frozen=True)
class Assignment:
    """Where every node of one node set goes, with loads and capacities.

    Nodes are keyed by name (a uuid in a live deployment).
    """

    conductors: Mapping[str, str | None]
    # node -> its first choice, for a node placed elsewhere because its
    # first choice was full.
    spilled: Mapping[str, str]
    # Nodes placed on their first choice beyond its capacity, because
    # every conductor they may use was full.
    overflow: frozenset[str]
    loads: Mapping[str, int]
    # conductor -> max_nodes; 0 is no limit.
    capacities: Mapping[str, int]

    @property
    def limited(self) -> bool:
        """Whether any conductor has a capacity."""
        return any(self.capacities.values())

    def over_capacity(self) -> dict[str, int]:
        """conductor -> nodes it holds beyond its capacity."""
        return {
            name: self.loads[name] - limit
            for name, limit in sorted(self.capacities.items())
            if limit and self.loads[name] > limit
        }


def is_limited(conductors: Sequence[profile.ConductorProfile]) -> bool:
    """Whether capacity changes anything for these conductors."""
    return any(c.max_nodes for c in conductors)


class _Rooms:
    """For each node class (its constraints), the conductors a spilled
    node of that class may still go to.

    A node's fallback order ranks conductors by score, then rendezvous
    weight; scores depend on the class alone. So the first conductor of
    that order with room is the rendezvous winner among the class's
    top-scoring conductors that have room: one tie-break over a short
    list, not a walk of every node's whole order. The lists change only
    when a conductor fills, at most once per conductor.
    """

    def __init__(self, placer: engine.PlacementEngine) -> None:
        self._placer = placer
        self._hash_of = dict(
            zip(
                (c.name for c in placer.conductors),
                rendezvous.hash_names(c.name for c in placer.conductors),
                strict=True,
            )
        )
        self.full: set[str] = set()
        self._open: dict[object, tuple[tuple[str, ...], list[int]]] = {}

    def fill(self, conductor: str) -> None:
        self.full.add(conductor)
        self._open.clear()

    def best(self, node: profile.NodeRequest, key: int) -> str | None:
        """The first conductor of the node's fallback order with room;
        ``key`` is the node's rendezvous hash."""
        found = self._open.get(node.constraints)
        if found is None:
            eligible = [
                v
                for v in self._placer.evaluate(node).eligible
                if v.conductor not in self.full
            ]
            top = max((v.score for v in eligible), default=None)
            names = tuple(v.conductor for v in eligible if v.score == top)
            found = (names, [self._hash_of[name] for name in names])
            self._open[node.constraints] = found
        names, hashes = found
        if len(names) < 2:
            return names[0] if names else None
        if len(names) < rendezvous.VECTOR_CELLS:
            return names[rendezvous.winner(key, hashes)]
        return names[rendezvous.winners([key], hashes)[0]]


def assign(
    placer: engine.PlacementEngine,
    nodes: Sequence[profile.NodeRequest],
) -> Assignment:
    """Place every node, honouring each conductor's ``max_nodes``.

    :raises: ValueError when two nodes have one name.
    """
    limits = {c.name: c.max_nodes for c in placer.conductors}
    loads = dict.fromkeys(limits, 0)
    keys = rendezvous.hash_keys(node.hash_key for node in nodes)
    first = placer.choose_all(nodes, keys)
    conductors = dict(zip((n.name for n in nodes), first, strict=True))
    if len(conductors) < len(nodes):
        seen: set[str] = set()
        for node in nodes:
            if node.name in seen:
                raise ValueError(_('node %r is listed twice') % node.name)
            seen.add(node.name)
    if not any(limits.values()):
        for conductor in first:
            if conductor is not None:
                loads[conductor] += 1
        return Assignment(conductors, {}, frozenset(), loads, limits)

    # Fewest ways out first, then a fair random draw: see the docstring.
    ways: dict[object, int] = {}
    for node in nodes:
        if node.constraints not in ways:
            ways[node.constraints] = len(placer.evaluate(node).eligible)
    order = sorted(
        range(len(nodes)),
        key=lambda i: (
            ways[nodes[i].constraints],
            keys[i],
            nodes[i].hash_key,
        ),
    )
    rooms = _Rooms(placer)
    spilled: dict[str, str] = {}
    overflow: set[str] = set()
    for index in order:
        choice = first[index]
        if choice is None:
            continue  # no eligible conductor: the engine's orphan
        placed = choice
        if choice in rooms.full:
            node = nodes[index]
            found = rooms.best(node, keys[index])
            if found is None:
                overflow.add(node.name)
            else:
                placed = found
                spilled[node.name] = choice
                conductors[node.name] = found
        loads[placed] += 1
        if loads[placed] == limits[placed]:
            rooms.fill(placed)
    return Assignment(conductors, spilled, frozenset(overflow), loads, limits)
