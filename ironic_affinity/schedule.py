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

"""The pacing rule: when each node follows a timed change.

A change made at ``at`` over ``period`` seconds is followed by each node
at its own moment, ``at + period * w``, where ``w`` is the node's
rendezvous weight on the change scaled to [0, 1): uniform over the nodes,
unrelated from one change to the next, and the same in every process
that read the same change. A node created after a change began follows
it at once (no conductor held it before, so waiting saves no takeover).

Over several changes, a node is at the *stage* after the newest change
it has followed, else at stage 0. Rebalancing (:mod:`rollout`, per
conductor) and switching rings (:mod:`adoption`, for the deployment)
both pace their moves by this rule; a switch also stops where it is when
the next one starts. Pure: the moment is an argument.
"""

from collections.abc import Callable
from collections.abc import Iterable
import dataclasses
import math
from typing import Generic
from typing import TypeVar

from ironic_affinity import rendezvous

# Changes kept at once, per conductor and for the switches: older ones
# have finished, or are cut short (their remaining moves happen at once)
# rather than a publication growing without bound.
MAX_KEPT = 8
# How far past a node's moment its place is read when listing its moves:
# past the moment, whatever the rounding of the clock.
_AFTER = 1e-3

T = TypeVar('T')


def change_key(*parts: str, at: float) -> int:
    """A 64-bit hash of a change, from what names it and its time."""
    # repr() of a float is its shortest exact form: equal in every
    # process that decoded the same published number.
    return rendezvous.hash64(
        b'\0'.join(
            [p.encode('utf-8') for p in parts] + [repr(float(at)).encode()]
        )
    )


@dataclasses.dataclass(frozen=True)
class Move(Generic[T]):
    """A node's move still to come, at a moment in seconds since the
    epoch: from ``source`` to ``target``."""

    at: float
    source: T
    target: T


class Schedule:
    """Timed changes, oldest first, and each node's stage in them."""

    def __init__(
        self,
        changes: Iterable[tuple[int, float, float]],
        stop_at_next: bool = False,
    ) -> None:
        """:param changes: per change, its hash (:func:`change_key`), its
            start and its period (0: every node follows it at once).
        :param stop_at_next: a change stops where it is when the next one
            starts (switches), rather than running on beside it.
        """
        listed = list(changes)
        stops = [at for _, at, _ in listed[1:]] if stop_at_next else []
        stops = (stops + [math.inf] * len(listed))[: len(listed)]
        # Per change: hash, start, 2**64 / period (None for a change made
        # at once) and stop; a node follows it once its weight is below
        # the time the change has run, scaled to 64 bits.
        self.changes = tuple(
            (hashed, at, None if period == 0 else 2.0**64 / period, stop)
            for (hashed, at, period), stop in zip(listed, stops, strict=True)
        )
        # What stage() walks, newest first, with the stage after each: a
        # ring lookup walks it once per changing conductor.
        self._newest_first = tuple(
            (index + 1,) + change
            for index, change in reversed(list(enumerate(self.changes)))
        )
        self.ends_at = max(
            (at + period for _, at, period in listed), default=-math.inf
        )

    def stage(
        self,
        node_hash: int,
        now: float,
        created_at: float | None = None,
        _weight: Callable[[int, int], int] = rendezvous.weight,
    ) -> int:
        """0 before the node follows any change, k after the k-th."""
        for after, hashed, at, scale, stop in self._newest_first:
            if created_at is not None and created_at >= at:
                # Newest first: the change under way when it was created.
                return after
            ran = (now if now < stop else stop) - at
            if scale is None:
                if ran >= 0:
                    return after
            elif _weight(node_hash, hashed) < ran * scale:
                return after
        return 0

    def moment(
        self, node_hash: int, index: int, created_at: float | None = None
    ) -> float:
        """When the node follows change ``index``, stops aside."""
        hashed, at, scale, _ = self.changes[index]
        if (created_at is not None and created_at >= at) or scale is None:
            return at
        return at + rendezvous.weight(node_hash, hashed) / scale

    def moments(
        self, node_hash: int, now: float, created_at: float | None = None
    ) -> list[float]:
        """The moments after ``now`` at which the node follows a change."""
        found = []
        for index, (_, at, _, stop) in enumerate(self.changes):
            if created_at is not None and created_at >= at:
                continue  # followed as the node was created
            moment = self.moment(node_hash, index)
            if now < moment < stop:
                found.append(moment)
        return found


def moves(
    moments: Iterable[float], now: float, where: Callable[[float], T]
) -> list[Move[T]]:
    """The moves a node makes at these moments, in order: ``where`` says
    where it is at a moment."""
    found: list[Move[T]] = []
    here = where(now)
    for moment in sorted(moments):
        there = where(moment + _AFTER)
        if there != here:
            found.append(Move(moment, here, there))
            here = there
    return found
