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

"""Gradual rebalancing: the voluntary moves of a change, spread over time.

A conductor that changes its profile (its tags reloaded) or joins the
group with ``[affinity]rebalance_period`` set publishes, beside its new
profile, the change: the profile before it (none for a join), when it
happened on its own clock, and the period. Each node follows the change
at its own moment: when the period's elapsed fraction passes the node's
*share*, a hash of the node, the conductor and the time of the change,
uniform over [0, 1). Until then the node sees the conductor as it was.

Every process places a node over the profiles the node sees, so all of
them agree on it from the published profiles and the clock alone, with
no shared state and no message of their own. How each case stays one
answer:

* Changes of different conductors are independent: a node sees each
  conductor at the stage of that conductor's changes it has passed.
* A second change of a conductor before its first has finished is kept
  after it; the conductor publishes both (at most :data:`MAX_CHANGES`).
  A node sees the profile after the newest change whose share it has
  passed, else the one before the oldest.
* A process that starts during a rollout reads the same changes.
* A conductor that dies or leaves takes its changes with it: its nodes
  move at once, as without pacing, over the profiles they see of the
  others.

Moves that must happen are never paced. If the conductor a node would
stay on can no longer take it now (its hard tags, conductor group or
hardware types exclude the node), the node goes at once to where it
will end up: the placement over the profiles of now. Only moves that
follow a better score or a new conductor wait their turn.

Nodes follow a change in hash order, so its moves spread over the
period like a fair random draw: out of N moves, about N x s / period in
any s seconds. Disagreement between processes comes from their clocks
(a skew of d seconds leaves N x d / period nodes differently placed for
a moment) and from how late each reads the group, as without pacing.
"""

from collections.abc import Iterable
from collections.abc import Sequence
import dataclasses
import math

from ironic_affinity import engine
from ironic_affinity import profile
from ironic_affinity import rendezvous

# Changes of one conductor kept at once: a conductor edited more often
# than this within one period has its oldest changes cut short (their
# remaining moves happen at once) rather than a profile growing without
# bound.
MAX_CHANGES = 8
# How far after a node's moment its placement is computed when listing
# its moves: past the moment, whatever the rounding of the clock.
_AFTER = 1e-3

# A node's view of the conductors that are changing: (name, stage) for
# each one it does not see as it is now.
Stages = tuple[tuple[str, int], ...]


@dataclasses.dataclass(frozen=True)
class Move:
    """A move of one node still to come, on the changing conductor's
    clock (seconds since the epoch)."""

    at: float
    source: str | None
    target: str | None


def change_hash(conductor: str, change: profile.ProfileChange) -> int:
    """A 64-bit hash of one change of one conductor."""
    # repr() of a float is its shortest exact form: equal in every
    # process that decoded the same published number.
    return rendezvous.hash64(
        b'%s\0%s'
        % (conductor.encode('utf-8'), repr(float(change.at)).encode())
    )


def share(
    node_key: bytes, conductor: str, change: profile.ProfileChange
) -> float:
    """When in the change's period the node follows it: from 0 to 1."""
    return _share(rendezvous.hash64(node_key), change_hash(conductor, change))


def _share(node_hash: int, change: int) -> float:
    # The rendezvous weight of the node on the change: uniform over the
    # nodes for one change, unrelated from one change to the next, and a
    # few integer operations once both hashes are known.
    return rendezvous.weight(node_hash, change) / 2.0**64


def elapsed(change: profile.ProfileChange, now: float) -> float:
    """The fraction of the change's period gone by ``now``, 0 to 1."""
    if now >= change.ends_at():
        return 1.0
    return min(1.0, max(0.0, (now - change.at) / change.period))


def stage(
    conductor: profile.ConductorProfile,
    node_key: bytes,
    now: float,
    created_at: float | None = None,
) -> int:
    """Which profile of the conductor the node sees ``now``: 0 is the
    profile before its oldest change, k the one after its k-th change,
    ``len(conductor.changes)`` the profile of now.

    :param created_at: when the node was created, if known.
    """
    return _stage(
        rendezvous.hash64(node_key),
        hashed_changes(conductor.name, conductor.changes),
        now,
        created_at,
    )


def _stage(
    node_hash: int,
    changes: Sequence[tuple[int, float, float]],
    now: float,
    created_at: float | None = None,
) -> int:
    """:func:`stage` from the node's hash and, per change, its hash, time
    and ``2**64 / period``: the node follows a change once its weight on
    the change is below the elapsed fraction of the period, scaled to 64
    bits (past the end, every weight is), or at once if it was created
    after the change began: no conductor held it before, so no takeover
    is saved by waiting, and it would only move twice."""
    for index in range(len(changes) - 1, -1, -1):
        hashed, at, scale = changes[index]
        if created_at is not None and created_at >= at:
            return index + 1
        if rendezvous.weight(node_hash, hashed) < (now - at) * scale:
            return index + 1
    return 0


def hashed_changes(
    conductor: str, changes: Iterable[profile.ProfileChange]
) -> list[tuple[int, float, float]]:
    """Per change: its hash, its time and ``2**64 / period``, what
    :func:`_stage` reads; a node follows the change at ``at + weight /
    scale``."""
    return [
        (change_hash(conductor, c), c.at, 2.0**64 / c.period) for c in changes
    ]


def profile_at(
    conductor: profile.ConductorProfile, stage_index: int
) -> profile.ConductorProfile | None:
    """The conductor as seen at a stage; None when it had not joined."""
    if stage_index >= len(conductor.changes):
        return conductor.settled()
    return conductor.changes[stage_index].before


def unfinished(
    changes: Iterable[profile.ProfileChange], now: float
) -> tuple[profile.ProfileChange, ...]:
    """The changes that still matter ``now``: once a change has finished,
    every node sees at least the profile after it, so it and every
    earlier one can be forgotten."""
    kept: list[profile.ProfileChange] = []
    for change in changes:
        if change.ends_at() <= now:
            kept = []
        else:
            kept.append(change)
    return tuple(kept)


def compose(
    previous: profile.ConductorProfile | None,
    wanted: profile.ConductorProfile,
    now: float,
    period: float,
) -> profile.ConductorProfile:
    """What a conductor publishes: ``wanted``, with the changes nodes
    still follow.

    :param previous: what it published last, with its changes; None when
        it joins the group.
    :param now: seconds since the epoch.
    :param period: ``[affinity]rebalance_period``; 0 publishes
        ``wanted`` alone, and every move happens at once.
    """
    wanted = wanted.settled()
    if period <= 0:
        return wanted
    if previous is None:
        return dataclasses.replace(
            wanted, changes=(profile.ProfileChange(None, now, period),)
        )
    kept = unfinished(previous.changes, now)
    before = previous.settled()
    if before.signature() != wanted.signature():
        kept += (profile.ProfileChange(before, now, period),)
    return dataclasses.replace(wanted, changes=kept[-MAX_CHANGES:])


def ends_at(conductors: Iterable[profile.ConductorProfile]) -> float | None:
    """When the last change of these conductors ends; None without any."""
    ends = [c.ends_at() for p in conductors for c in p.changes]
    return max(ends) if ends else None


def _score(evaluation: engine.Evaluation) -> int | None:
    """A one-conductor evaluation's score, None when excluded."""
    (verdict,) = evaluation.verdicts
    return verdict.score if verdict.excluded is None else None


class PacedPlacer:
    """Placement while changes roll out, over one snapshot's engine.

    Answers for a node and a moment; the same in every process that holds
    the same profiles and reads the same time.

    A node's placement is the engine's rule over the conductors as the
    node sees them. The conductors that are not changing are one engine,
    whose verdicts are shared by every node with the same constraints;
    each changing conductor adds, at each of its stages, a one-conductor
    engine. A lookup then costs one verdict per changing conductor, not
    an engine per combination of stages: a deployment that reloads every
    conductor's tags at once has a combination per node.
    """

    def __init__(self, current: engine.PlacementEngine) -> None:
        """:param current: the engine over the profiles of now, each
        carrying the changes it published."""
        self.current = current
        self._rolling = tuple(c for c in current.conductors if c.changes)
        self.ends_at = ends_at(self._rolling) or -math.inf
        self._steady = engine.PlacementEngine(
            c for c in current.conductors if not c.changes
        )
        # Per changing conductor, per stage: the conductor as seen at
        # that stage, alone; None before it joined.
        self._seen = tuple(
            tuple(
                None
                if profile_at(c, index) is None
                else engine.PlacementEngine([profile_at(c, index)])  # type: ignore[list-item]
                for index in range(len(c.changes) + 1)
            )
            for c in self._rolling
        )
        self._hash_of = {
            c.name: rendezvous.hash64(c.name.encode('utf-8'))
            for c in current.conductors
        }
        # Each changing conductor's changes with their hashes, computed
        # once: a lookup then hashes only the node.
        self._changes = tuple(
            hashed_changes(c.name, c.changes) for c in self._rolling
        )
        # By node constraints: per changing conductor, per stage, its
        # score for such a node, or None where it cannot take it. A
        # lookup then reads verdicts instead of computing them.
        self._scores: dict[object, tuple[tuple[int | None, ...], ...]] = {}
        self._eligible: dict[object, frozenset[str]] = {}

    def _scores_for(
        self, node: profile.NodeRequest
    ) -> tuple[tuple[int | None, ...], ...]:
        found = self._scores.get(node.constraints)
        if found is None:
            found = tuple(
                tuple(
                    None if seen is None else _score(seen.evaluate(node))
                    for seen in stages
                )
                for stages in self._seen
            )
            if len(self._scores) >= engine.MAX_CACHED_EVALUATIONS:
                self._scores.clear()
            self._scores[node.constraints] = found
        return found

    @property
    def rolling(self) -> tuple[profile.ConductorProfile, ...]:
        """The conductors with changes, by name."""
        return self._rolling

    def active(self, now: float) -> bool:
        """Whether any node may still see a conductor as it was."""
        return now < self.ends_at

    def stages(self, node: profile.NodeRequest, now: float) -> Stages:
        """The changing conductors this node does not see as they are."""
        node_hash = rendezvous.hash64(node.hash_key)
        seen = []
        for conductor, changes in zip(
            self._rolling, self._changes, strict=True
        ):
            found = _stage(node_hash, changes, now, node.created_at)
            if found < len(changes):
                seen.append((conductor.name, found))
        return tuple(seen)

    def paced(self, node: profile.NodeRequest, now: float) -> str | None:
        """The engine's rule over the conductors as the node sees them."""
        evaluation = self._steady.evaluate(node)
        top = evaluation.top_score
        tied = list(evaluation.tied)
        key = rendezvous.hash64(node.hash_key)
        scores = self._scores_for(node)
        # One pass per changing conductor, reading precomputed hashes
        # and scores.
        for index, changes in enumerate(self._changes):
            score = scores[index][_stage(key, changes, now, node.created_at)]
            if score is None:
                continue
            if top is None or score > top:
                top, tied = score, [self._rolling[index].name]
            elif score == top:
                tied.append(self._rolling[index].name)
        if len(tied) < 2:
            return tied[0] if tied else None
        # The engine's tie-break: the highest rendezvous weight, equal
        # weights to the first name.
        return max(
            sorted(tied),
            key=lambda name: rendezvous.weight(key, self._hash_of[name]),
        )

    def eligible_now(self, node: profile.NodeRequest) -> frozenset[str]:
        """The conductors that may take the node by the profiles of now."""
        found = self._eligible.get(node.constraints)
        if found is None:
            found = frozenset(
                v.conductor for v in self.current.evaluate(node).eligible
            )
            if len(self._eligible) >= engine.MAX_CACHED_EVALUATIONS:
                self._eligible.clear()
            self._eligible[node.constraints] = found
        return found

    def conductor(self, node: profile.NodeRequest, now: float) -> str | None:
        """The node's conductor at ``now``."""
        return self.explain(node, now)[0]

    def explain(
        self, node: profile.NodeRequest, now: float
    ) -> tuple[str | None, bool]:
        """The node's conductor at ``now``, and whether it is there by a
        forced move: the conductor it would wait on can no longer take
        it."""
        waiting = self.paced(node, now)
        if waiting is not None and waiting in self.eligible_now(node):
            return waiting, False
        final = self.current.place(node).conductor
        return final, final != waiting

    def fallback_order(
        self, node: profile.NodeRequest, now: float
    ) -> tuple[str, ...]:
        """The node's conductor at ``now``, then the others of its
        fallback order by the profiles of now: a move forced by a death
        goes straight to where the node will end up."""
        first = self.conductor(node, now)
        order = self.current.fallback_order(node)
        if first is None:
            return order
        return (first,) + tuple(c for c in order if c != first)

    def pending(self, node: profile.NodeRequest, now: float) -> list[Move]:
        """The node's moves still to come, in order."""
        key = rendezvous.hash64(node.hash_key)
        moments = []
        created = node.created_at
        for changes in self._changes:
            for hashed, at, scale in changes:
                if created is not None and created >= at:
                    continue  # followed as the node was created
                # The moment the node's weight falls below the scaled
                # elapsed fraction (_stage's test), if still to come.
                moment = at + rendezvous.weight(key, hashed) / scale
                if moment > now:
                    moments.append(moment)
        moves = []
        where = self.conductor(node, now)
        for moment in sorted(moments):
            there = self.conductor(node, moment + _AFTER)
            if there != where:
                moves.append(Move(moment, where, there))
                where = there
        return moves
