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
at its own moment, by the pacing rule of :mod:`ironic_affinity.schedule`
(keyed by the conductor and the time of the change); until then the
node sees the conductor as it was.

Every process places a node over the profiles the node sees, so all of
them agree on it from the published profiles and the clock alone:

* Changes of different conductors are independent: a node sees each
  conductor at the stage of that conductor's changes it has passed.
* A second change of a conductor before its first has finished is kept
  after it (at most :data:`schedule.MAX_KEPT`), and both run on.
* A conductor that dies or leaves takes its changes with it: its nodes
  move at once, over the profiles they see of the others.

Moves that must happen are never paced: if the conductor a node would
stay on can no longer take it now (hard tags, conductor group, hardware
types), the node goes at once to the placement over the profiles of now.
Only moves that follow a better score or a new conductor wait their
turn. Why and with what figures: doc/source/contributor/rollout.rst.
"""

from collections.abc import Iterable
import dataclasses
import math

from ironic_affinity import engine
from ironic_affinity import profile
from ironic_affinity import rendezvous
from ironic_affinity import schedule

# A node's view of the conductors that are changing: (name, stage) for
# each one it does not see as it is now.
Stages = tuple[tuple[str, int], ...]


def schedule_of(conductor: profile.ConductorProfile) -> schedule.Schedule:
    """The conductor's changes as a pacing schedule: stage 0 is the
    profile before its oldest change, k the one after its k-th."""
    return schedule.Schedule(
        (schedule.change_key(conductor.name, at=c.at), c.at, c.period)
        for c in conductor.changes
    )


def stage(
    conductor: profile.ConductorProfile,
    node_key: bytes,
    now: float,
    created_at: float | None = None,
) -> int:
    """Which profile of the conductor the node sees ``now``
    (:func:`profile_at`).

    :param created_at: when the node was created, if known.
    """
    return schedule_of(conductor).stage(
        rendezvous.hash64(node_key), now, created_at
    )


def profile_at(
    conductor: profile.ConductorProfile, stage_index: int
) -> profile.ConductorProfile | None:
    """The conductor as seen at a stage; None when it had not joined."""
    if stage_index >= len(conductor.changes):
        return conductor.without_changes()
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
    wanted = wanted.without_changes()
    if period <= 0:
        return wanted
    if previous is None:
        return dataclasses.replace(
            wanted, changes=(profile.ProfileChange(None, now, period),)
        )
    kept = unfinished(previous.changes, now)
    before = previous.without_changes()
    if before.signature() != wanted.signature():
        kept += (profile.ProfileChange(before, now, period),)
    return dataclasses.replace(wanted, changes=kept[-schedule.MAX_KEPT :])


def ends_at(conductors: Iterable[profile.ConductorProfile]) -> float | None:
    """When the last change of these conductors ends; None without any."""
    ends = [c.ends_at() for p in conductors for c in p.changes]
    return max(ends) if ends else None


def _rank(evaluation: engine.Evaluation) -> tuple[bool, int] | None:
    """A one-conductor evaluation's rank, None when excluded."""
    (verdict,) = evaluation.verdicts
    return verdict.rank if verdict.excluded is None else None


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
        # Each changing conductor's schedule, hashed once: a lookup then
        # hashes only the node.
        self._schedules = tuple(schedule_of(c) for c in self._rolling)
        # By node constraints: per changing conductor, per stage, its
        # rank for such a node, or None where it cannot take it. A
        # lookup then reads verdicts instead of computing them.
        self._ranks: dict[
            object, tuple[tuple[tuple[bool, int] | None, ...], ...]
        ] = {}
        self._eligible: dict[object, frozenset[str]] = {}

    def _ranks_for(
        self, node: profile.NodeRequest
    ) -> tuple[tuple[tuple[bool, int] | None, ...], ...]:
        found = self._ranks.get(node.constraints)
        if found is None:
            found = tuple(
                tuple(
                    None if seen is None else _rank(seen.evaluate(node))
                    for seen in stages
                )
                for stages in self._seen
            )
            if len(self._ranks) >= engine.MAX_CACHED_EVALUATIONS:
                self._ranks.clear()
            self._ranks[node.constraints] = found
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
        for conductor, paced in zip(
            self._rolling, self._schedules, strict=True
        ):
            found = paced.stage(node_hash, now, node.created_at)
            if found < len(paced.changes):
                seen.append((conductor.name, found))
        return tuple(seen)

    def paced(self, node: profile.NodeRequest, now: float) -> str | None:
        """The engine's rule over the conductors as the node sees them."""
        evaluation = self._steady.evaluate(node)
        top = evaluation.top_rank
        tied = list(evaluation.tied)
        key = rendezvous.hash64(node.hash_key)
        ranks = self._ranks_for(node)
        # One pass per changing conductor, reading precomputed hashes
        # and ranks.
        for index, paced in enumerate(self._schedules):
            rank = ranks[index][paced.stage(key, now, node.created_at)]
            if rank is None:
                continue
            if top is None or rank > top:
                top, tied = rank, [self._rolling[index].name]
            elif rank == top:
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

    def pending(
        self, node: profile.NodeRequest, now: float
    ) -> list[schedule.Move[str | None]]:
        """The node's moves still to come, in order."""
        key = rendezvous.hash64(node.hash_key)
        moments = [
            moment
            for paced in self._schedules
            for moment in paced.moments(key, now, node.created_at)
        ]
        return schedule.moves(
            moments, now, lambda moment: self.conductor(node, moment)
        )
