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

"""Placement under conductor capacity (``max_nodes``).

The engine sends each node to the first conductor of its fallback order.
With soft tags and uneven racks that can give one conductor every node
while its peers sit idle. When any conductor has a capacity, placement
becomes a matching of nodes to conductors with capacities (the
"hospitals and residents" problem), computed by deferred acceptance
(Gale and Shapley, 1962):

* each node asks the conductors of its fallback order in turn, best
  first: every preference the engine computes (hard constraints, drain,
  score, then rendezvous weight) is kept;
* a conductor with room holds every node that asks; a full one keeps
  the nodes most entitled to it and turns the least entitled away, and
  that node asks its next conductor. Entitlement, most first: a node no
  other conductor may take; then the node's score for this conductor
  (its soft tags make it this conductor's node); then the node's
  rendezvous weight on this conductor, so that which of equal nodes a
  conductor keeps is consistent hashing too;
* a node that every conductor it may use turned away goes to its first
  choice anyway, beyond that conductor's capacity: capacity never
  orphans a node and never breaks a hard constraint. That is the only
  way a conductor goes over.

The result is the one stable matching that is best for every node (no
node and conductor would both rather have each other), whatever the
order nodes ask in: so every process computes the same one from the
same members and nodes, without talking to each other. While no
conductor is full it is the engine's placement; a node leaves its first
choice only for nodes more entitled to it. Adding or removing a node
moves other nodes along one chain of turnings-away, the behaviour of
consistent hashing with bounded loads (Mirrokni, Thorup and
Zadimoghaddam, SODA 2018); tools/benchmark_capacity.py measures it.
"""

from collections.abc import Callable
from collections.abc import Mapping
from collections.abc import Sequence
import dataclasses
import heapq

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


# How entitled a node is to a conductor: compared as tuples, greater is
# more (see the module's docstring); the node's key, then its name (two
# nodes of a scenario may share a key: one's uuid, another's name) come
# last, so that no two nodes are ever equal.
Entitlement = tuple[bool, tuple[bool, int], int, bytes, str]


class _Asking:
    """One node on its way through its fallback order."""

    __slots__ = (
        'node',
        'key',
        'ways',
        'first',
        'order',
        'at',
        'constraints',
        'hash_key',
    )

    def __init__(
        self, node: profile.NodeRequest, key: int, ways: int, first: str
    ) -> None:
        self.node = node
        self.key = key
        self.ways = ways
        self.first = first
        # Properties of the node, computed each time they are read.
        self.constraints = node.constraints
        self.hash_key = node.hash_key
        # The start of its fallback order, computed once it is refused:
        # most nodes never are, and need only their first choice.
        self.order: Sequence[str] | None = None
        self.at = 0


# Steps of deferred acceptance between two calls of ``pause``.
PAUSE_EVERY = 2000

# How much of a refused node's fallback order is computed at first: a
# node is rarely refused this many times, and past it gets the rest.
ORDER_AHEAD = 16


def assign(
    placer: engine.PlacementEngine,
    nodes: Sequence[profile.NodeRequest],
    pause: Callable[[], None] | None = None,
) -> Assignment:
    """Place every node, honouring each conductor's ``max_nodes``.

    :param pause: called every :data:`PAUSE_EVERY` steps, for a caller
        whose other threads only run when this one yields.
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
    if any(limits.values()):
        overflow = _defer(
            placer, nodes, keys, first, conductors, limits, pause
        )
    else:
        overflow = set()
    spilled: dict[str, str] = {}
    for node, choice in zip(nodes, first, strict=True):
        if node.name in overflow:
            conductors[node.name] = choice
        elif conductors[node.name] != choice and choice is not None:
            spilled[node.name] = choice
        placed = conductors[node.name]
        if placed is not None:
            loads[placed] += 1
    return Assignment(conductors, spilled, frozenset(overflow), loads, limits)


def _defer(
    placer: engine.PlacementEngine,
    nodes: Sequence[profile.NodeRequest],
    keys: Sequence[int],
    first: Sequence[str | None],
    conductors: dict[str, str | None],
    limits: Mapping[str, int],
    pause: Callable[[], None] | None,
) -> set[str]:
    """Deferred acceptance: sets ``conductors`` to the matching, and
    returns the nodes every conductor they may use turned away."""
    hash_of = dict(zip(limits, rendezvous.hash_names(limits), strict=True))
    ranks: dict[tuple[object, str], tuple[bool, int]] = {}
    ways: dict[object, int] = {}
    for node in nodes:
        if node.constraints not in ways:
            eligible = placer.evaluate(node).eligible
            ways[node.constraints] = len(eligible)
            for verdict in eligible:
                ranks[node.constraints, verdict.conductor] = verdict.rank
    # Per limited conductor, a min-heap of the nodes it holds: the least
    # entitled on top, to be compared with the next that asks.
    held: dict[str, list[tuple[Entitlement, _Asking]]] = {
        name: [] for name, limit in limits.items() if limit
    }
    asking = [
        _Asking(node, key, ways[node.constraints], choice)
        for node, key, choice in zip(nodes, keys, first, strict=True)
        if choice is not None
    ]
    overflow = set()
    # Nodes refused by their first choice, whose orders are computed
    # together: one vector operation per constraints, not one per node.
    refused: list[_Asking] = []
    steps = 0
    while asking or refused:
        steps += 1
        if pause is not None and steps % PAUSE_EVERY == 0:
            pause()
        if not asking:
            orders = placer.fallback_orders(
                [turn.node for turn in refused],
                [turn.key for turn in refused],
                ORDER_AHEAD,
            )
            for turn, order in zip(refused, orders, strict=True):
                turn.order = order
            asking, refused = refused, []
        turn = asking.pop()
        if turn.at == 0:
            name = turn.first
        elif turn.order is None:
            refused.append(turn)
            continue
        else:
            if turn.at == len(turn.order) < turn.ways:
                turn.order = placer.fallback_order(turn.node)
            if turn.at == len(turn.order):
                overflow.add(turn.node.name)
                continue
            name = turn.order[turn.at]
        turn.at += 1
        room = held.get(name)
        if room is None:  # no limit
            conductors[turn.node.name] = name
            continue
        entitled = (
            turn.ways == 1,
            ranks[turn.constraints, name],
            rendezvous.weight(turn.key, hash_of[name]),
            turn.hash_key,
            turn.node.name,
        )
        if len(room) < limits[name]:
            heapq.heappush(room, (entitled, turn))
        elif entitled > room[0][0]:
            asking.append(heapq.heapreplace(room, (entitled, turn))[1])
        else:
            asking.append(turn)
            continue
        conductors[turn.node.name] = name
    return overflow


def place_newcomer(
    assignment: Assignment,
    placer: engine.PlacementEngine,
    node: profile.NodeRequest,
) -> str | None:
    """Where a node that ``assignment`` did not place goes until the next
    one does (a node just read, or whose tags just changed): the first
    conductor of its fallback order with room left, else its first
    choice. It takes no room: every process answers it alike from the
    same assignment.
    """
    order = placer.fallback_order(node)
    limits, loads = assignment.capacities, assignment.loads
    for name in order:
        limit = limits.get(name, 0)
        if not limit or loads.get(name, 0) < limit:
            return name
    return order[0] if order else None
