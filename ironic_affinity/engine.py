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

"""The placement engine: pure computation, no I/O, no configuration.

For each node, over the live conductors (RFE "ironic conductor - node
affinity placement", final form):

1. exclude conductors in another conductor group or not running the
   node's hardware type (Ironic's own constraints);
2. exclude a conductor if any node tag is in its hard_anti_affinity_tags;
3. exclude a conductor if any of its hard_affinity_tags is missing from
   the node's tags;
4. score the rest: per node tag, minus its weight if the tag is in the
   conductor's soft_anti_affinity_tags, else plus its weight if it is in
   soft_affinity_tags;
5. the node goes to a top scorer, whatever the score; ties are broken by
   rendezvous hashing of the node over just the tied conductors.

A draining conductor (``[affinity]drain``) comes after every other
eligible one, whatever the scores: it takes a node only when no other
conductor may. Put another way, each eligible conductor is ranked by
(not draining, score, rendezvous weight) and the node takes the first;
the rest of that ranking is the fallback order, which is exactly what
the rule gives when the chosen conductor dies, then the next.

An engine is a snapshot of one membership. Verdicts depend only on a
node's constraints (tags, driver, group), of which large deployments have
a few hundred distinct ones, so they are computed once per distinct set
and shared; only the tie-break is per node. Among fewer than
:data:`rendezvous.VECTOR_CELLS` tied conductors it costs a few
microseconds and is computed anew at each ask: remembering every node's
placement cost each conductor 10 MiB at 20,000 nodes. Among more, it is
numpy's and remembered, up to a bound.
"""

from collections.abc import Iterable
from collections.abc import Sequence
import dataclasses
import itertools

from ironic_affinity import profile
from ironic_affinity import rendezvous
from ironic_affinity._i18n import _

# Bounds on the caches of one snapshot, so that a stream of distinct nodes
# cannot grow a long-lived process without limit. Past the bound a cache
# starts again empty: correctness never depends on a cache.
MAX_CACHED_EVALUATIONS = 1 << 16
MAX_CACHED_PLACEMENTS = 1 << 20


@dataclasses.dataclass(frozen=True)
class Verdict:
    """One conductor's verdict for one node's constraints."""

    conductor: str
    # Why the conductor cannot take the node; None when it can.
    excluded: str | None = None
    score: int = 0
    # (tag, contribution) for each node tag that changed the score.
    breakdown: tuple[tuple[str, int], ...] = ()
    draining: bool = False

    @property
    def rank(self) -> tuple[bool, int]:
        """What orders eligible conductors for a node, best highest."""
        return (not self.draining, self.score)


@dataclasses.dataclass(frozen=True)
class Evaluation:
    """The verdicts of every conductor for one set of node constraints."""

    verdicts: tuple[Verdict, ...]
    # The best rank of an eligible conductor; None when none is.
    top_rank: tuple[bool, int] | None
    # The conductors sharing the top rank, by name.
    tied: tuple[str, ...]

    @property
    def top_score(self) -> int | None:
        return None if self.top_rank is None else self.top_rank[1]

    @property
    def eligible(self) -> tuple[Verdict, ...]:
        return tuple(v for v in self.verdicts if v.excluded is None)


@dataclasses.dataclass(frozen=True)
class Choice:
    """The engine's choice for one node. ``conductor`` is None when none
    is valid."""

    node: str
    conductor: str | None
    score: int | None
    tied: tuple[str, ...]


def _judge(
    conductor: profile.ConductorProfile,
    constraints: tuple[frozenset[str], str | None, str],
) -> Verdict:
    node_tags, driver, group = constraints
    # Every rule that excludes the conductor is reported, not just the
    # first: an operator fixing a node's tags wants the whole list.
    reasons = []
    if conductor.conductor_group != group:
        reasons.append(
            _("conductor group %(conductor)r differs from the node's %(node)r")
            % {'conductor': conductor.conductor_group, 'node': group}
        )
    if (
        driver is not None
        and conductor.hardware_types is not None
        and driver not in conductor.hardware_types
    ):
        reasons.append(_('does not run hardware type %r') % driver)
    banned = node_tags & conductor.hard_anti_affinity_tags
    if banned:
        reasons.append(
            _('node has hard-anti-affinity tag(s) %s')
            % ', '.join(sorted(banned))
        )
    missing = conductor.hard_affinity_tags - node_tags
    if missing:
        reasons.append(
            _('node lacks hard-affinity tag(s) %s')
            % ', '.join(sorted(missing))
        )
    if reasons:
        return Verdict(
            conductor.name, '; '.join(reasons), draining=conductor.draining
        )
    breakdown = []
    for tag in sorted(node_tags):
        # Anti wins over affinity for a tag in both lists, as in the RFE's
        # pseudo-code.
        if tag in conductor.soft_anti_affinity_tags:
            breakdown.append((tag, -conductor.soft_anti_affinity_tags[tag]))
        elif tag in conductor.soft_affinity_tags:
            breakdown.append((tag, conductor.soft_affinity_tags[tag]))
    return Verdict(
        conductor.name,
        score=sum(w for _t, w in breakdown),
        breakdown=tuple(breakdown),
        draining=conductor.draining,
    )


def _by_constraints(
    nodes: Sequence[profile.NodeRequest],
) -> dict[object, list[int]]:
    """The indexes of ``nodes``, by constraints: nodes with equal
    constraints share their verdicts, so a batch works per group."""
    groups: dict[object, list[int]] = {}
    for index, node in enumerate(nodes):
        groups.setdefault(node.constraints, []).append(index)
    return groups


class PlacementEngine:
    """Places nodes over one snapshot of live conductors.

    The result depends only on the set of conductors and the node: not on
    the order anything is listed in, the process, the host or
    PYTHONHASHSEED.
    """

    def __init__(self, conductors: Iterable[profile.ConductorProfile]):
        ordered = sorted(conductors, key=lambda c: c.name)
        for first, second in itertools.pairwise(ordered):
            if first.name == second.name:
                raise ValueError(
                    _('conductor %r is listed twice') % first.name
                )
        self._conductors = tuple(ordered)
        # Conductors with one signature share every verdict but the name.
        self._by_signature: dict[
            tuple[object, ...], list[profile.ConductorProfile]
        ] = {}
        for conductor in ordered:
            self._by_signature.setdefault(conductor.signature(), []).append(
                conductor
            )
        self._hash_of = dict(
            zip(
                (c.name for c in ordered),
                rendezvous.hash_names(c.name for c in ordered),
                strict=True,
            )
        )
        self._evaluations: dict[
            tuple[frozenset[str], str | None, str],
            tuple[Evaluation, tuple[int, ...]],
        ] = {}
        # Only placements among many tied conductors: see the docstring.
        self._placements: dict[tuple[bytes, object], Choice] = {}

    @property
    def conductors(self) -> tuple[profile.ConductorProfile, ...]:
        """The conductors of this snapshot, by name."""
        return self._conductors

    def _evaluate(
        self, constraints: tuple[frozenset[str], str | None, str]
    ) -> tuple[Evaluation, tuple[int, ...]]:
        cached = self._evaluations.get(constraints)
        if cached is not None:
            return cached
        verdicts: list[Verdict] = []
        for members in self._by_signature.values():
            verdict = _judge(members[0], constraints)
            verdicts.extend(
                Verdict(
                    m.name,
                    verdict.excluded,
                    verdict.score,
                    verdict.breakdown,
                    verdict.draining,
                )
                for m in members
            )
        verdicts.sort(key=lambda v: v.conductor)
        ranks = [v.rank for v in verdicts if v.excluded is None]
        top = max(ranks) if ranks else None
        tied = tuple(
            v.conductor
            for v in verdicts
            if v.excluded is None and v.rank == top
        )
        hashes = tuple(self._hash_of[name] for name in tied)
        result = (Evaluation(tuple(verdicts), top, tied), hashes)
        if len(self._evaluations) >= MAX_CACHED_EVALUATIONS:
            self._evaluations.clear()
        self._evaluations[constraints] = result
        return result

    def evaluate(self, node: profile.NodeRequest) -> Evaluation:
        """Every conductor's verdict for this node's constraints."""
        return self._evaluate(node.constraints)[0]

    def place(self, node: profile.NodeRequest) -> Choice:
        """Where this node goes."""
        evaluation, hashes = self._evaluate(node.constraints)
        tied = evaluation.tied
        if len(tied) < rendezvous.VECTOR_CELLS:
            conductor = None
            if len(tied) == 1:
                conductor = tied[0]
            elif tied:
                key = rendezvous.hash64(node.hash_key)
                conductor = tied[rendezvous.winner(key, hashes)]
            return Choice(node.name, conductor, evaluation.top_score, tied)
        memo_key = (node.hash_key, node.constraints)
        placement = self._placements.get(memo_key)
        if placement is None or placement.node != node.name:
            placement = self.place_all([node])[0]
            if len(self._placements) >= MAX_CACHED_PLACEMENTS:
                self._placements.clear()
            self._placements[memo_key] = placement
        return placement

    def place_all(
        self,
        nodes: Sequence[profile.NodeRequest],
        keys: Sequence[int] | None = None,
    ) -> list[Choice]:
        """Place many nodes at once, in the order given.

        :param keys: the nodes' :func:`rendezvous.hash_keys`, when the
            caller has them already.
        """
        chosen = self.choose_all(nodes, keys)
        placements = []
        for node, conductor in zip(nodes, chosen, strict=True):
            evaluation = self._evaluate(node.constraints)[0]
            placements.append(
                Choice(
                    node.name, conductor, evaluation.top_score, evaluation.tied
                )
            )
        return placements

    def choose_all(
        self,
        nodes: Sequence[profile.NodeRequest],
        keys: Sequence[int] | None = None,
    ) -> list[str | None]:
        """:meth:`place_all`'s conductors alone, for callers that place
        100,000 nodes and need no more.

        Nodes are grouped by constraints so that each group's tie-break is
        one batch (one vector operation when large).
        """
        groups = _by_constraints(nodes)
        result: list[str | None] = [None] * len(nodes)
        for constraints, indexes in groups.items():
            evaluation, hashes = self._evaluate(constraints)  # type: ignore
            tied = evaluation.tied
            if not tied:
                continue
            if keys is None:
                batch = rendezvous.hash_keys(
                    nodes[i].hash_key for i in indexes
                )
            else:
                batch = [keys[i] for i in indexes]
            picks = rendezvous.winners(batch, hashes)
            for index, pick in zip(indexes, picks, strict=True):
                result[index] = tied[pick]
        return result

    def fallback_orders(
        self,
        nodes: Sequence[profile.NodeRequest],
        keys: Sequence[int],
        limit: int,
    ) -> list[tuple[str, ...]]:
        """The first ``limit`` conductors of each node's
        :meth:`fallback_order`, for many nodes at once.

        :param keys: the nodes' :func:`rendezvous.hash_keys`.
        """
        groups = _by_constraints(nodes)
        result: list[tuple[str, ...]] = [()] * len(nodes)
        for constraints, indexes in groups.items():
            evaluation, _hashes = self._evaluate(constraints)  # type: ignore
            tiers: dict[tuple[bool, int], list[str]] = {}
            for verdict in evaluation.eligible:
                tiers.setdefault(verdict.rank, []).append(verdict.conductor)
            orders: list[list[str]] = [[] for _ in indexes]
            for rank in sorted(tiers, reverse=True):
                names = tiers[rank]
                wanted = [i for i, o in enumerate(orders) if len(o) < limit]
                if not wanted:
                    break
                ranked = rendezvous.rankings(
                    [keys[indexes[i]] for i in wanted],
                    [self._hash_of[name] for name in names],
                    limit,
                )
                for i, picks in zip(wanted, ranked, strict=True):
                    orders[i].extend(names[p] for p in picks)
            for index, order in zip(indexes, orders, strict=True):
                result[index] = tuple(order[:limit])
        return result

    def fallback_order(self, node: profile.NodeRequest) -> tuple[str, ...]:
        """Every eligible conductor, the chosen one first, then who takes
        the node if it dies, then the next, and so on."""
        evaluation = self.evaluate(node)
        eligible = evaluation.eligible
        if not eligible:
            return ()
        key = rendezvous.hash64(node.hash_key)
        weights = [
            rendezvous.weight(key, self._hash_of[v.conductor])
            for v in eligible
        ]
        ranked = sorted(
            zip(eligible, weights, strict=True),
            key=lambda pair: (
                pair[0].draining,
                -pair[0].score,
                -pair[1],
                pair[0].conductor,
            ),
        )
        return tuple(verdict.conductor for verdict, _w in ranked)
