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

"""Switching a deployment between Ironic's ring and affinity placement,
one node at a time.

A deployment that turns affinity placement on moves most of its nodes:
with N conductors about (N-1)/N of them, since Ironic's ring and tags
have nothing in common, and each ACTIVE node that moves is a takeover
for the conductor that receives it. A *switch* (to affinity, or back to
Ironic's ring) is therefore paced as a conductor's change is
(:mod:`ironic_affinity.rollout`): each node follows it at its own moment,
when the switch's elapsed fraction passes the node's share, a hash of
the node and the switch, uniform over [0, 1). Every process computes the
same side for a node from the switches and the clock alone.

Several switches may overlap: an operator who turns affinity off again
halfway aborts the first switch. A switch stops where it is when the
next one starts; a node is on the side of the newest switch whose share
it has passed by then, else on the side before the oldest switch. So
after an abort the nodes that had moved move back at the pace of the
second switch, and the nodes that had not moved do not move at all.

Which conductor a side gives a node is not decided here: the stock side
is Ironic's own ring, the affinity side the placement pipeline
(:mod:`ironic_affinity.placement`). Pure: no I/O; the moment is an
argument, in seconds since the epoch, as switches are published.
"""

from collections.abc import Iterable
import dataclasses
import math

from ironic_affinity import rendezvous
from ironic_affinity._i18n import _

STOCK = 'stock'
AFFINITY = 'affinity'
SIDES = (STOCK, AFFINITY)
# Switches kept at once: older ones have finished long ago, and every
# node has followed at least the newest finished one.
MAX_SWITCHES = 8
# How far past a node's moment its side is read when listing its moves:
# past the moment, whatever the rounding of the clock (as rollout does).
_AFTER = 1e-3


@dataclasses.dataclass(frozen=True)
class Switch:
    """The deployment's placement switching to ``to`` from ``at``, over
    ``period`` seconds."""

    to: str
    at: float
    period: float

    def __post_init__(self) -> None:
        if self.to not in SIDES:
            raise ValueError(
                _('a switch goes to one of %(sides)s, not %(to)r')
                % {'sides': ', '.join(SIDES), 'to': self.to}
            )
        if not self.period >= 0:
            raise ValueError(
                _('a switch period is a number of seconds, not %r')
                % self.period
            )

    def ends_at(self) -> float:
        return self.at + self.period

    def hashed(self) -> int:
        """A 64-bit hash of this switch: nodes' shares differ from one
        switch to the next, so an abort does not retrace the same
        order."""
        # repr() of a float is its shortest exact form: equal in every
        # process that decoded the same published number.
        return rendezvous.hash64(
            b'switch\0%s\0%s'
            % (self.to.encode(), repr(float(self.at)).encode())
        )


@dataclasses.dataclass(frozen=True)
class Move:
    """A node's change of side still to come."""

    at: float
    source: str
    target: str


class Adoption:
    """Which side each node is on, over a list of switches."""

    def __init__(self, switches: Iterable[Switch], before: str = STOCK):
        """:param switches: the switches, oldest first.
        :param before: the side before the oldest switch.
        """
        # By time; two at one moment in a fixed order, whatever the order
        # they were read in.
        ordered = tuple(sorted(switches, key=lambda s: (s.at, s.to, s.period)))
        self.switches = ordered[-MAX_SWITCHES:]
        # A switch dropped from the front has finished before the ones
        # kept started (they are published in order): every node is on
        # its side.
        self.before = (
            before
            if len(ordered) <= MAX_SWITCHES
            else ordered[-MAX_SWITCHES - 1].to
        )
        # Per switch: its hash, start, 2**64 / period (inf for a switch
        # made at once), and when the next switch stops it: a node
        # follows it once its weight on the switch is below the time it
        # has run, scaled to 64 bits.
        stops = [s.at for s in self.switches[1:]] + [math.inf]
        stops = stops[: len(self.switches)]
        self._hashed = tuple(
            (
                s.hashed(),
                s.at,
                math.inf if s.period == 0 else 2.0**64 / s.period,
                stop,
            )
            for s, stop in zip(self.switches, stops, strict=True)
        )
        self.ends_at = max(
            (s.ends_at() for s in self.switches), default=-math.inf
        )

    def side(self, node_key: bytes, now: float) -> str:
        """The side the node is on at ``now``."""
        return self._side(rendezvous.hash64(node_key), now)

    def _side(self, node_hash: int, now: float) -> str:
        for index in range(len(self._hashed) - 1, -1, -1):
            hashed, at, scale, stop = self._hashed[index]
            ran = min(now, stop) - at
            if scale == math.inf:
                followed = ran >= 0
            else:
                followed = rendezvous.weight(node_hash, hashed) < ran * scale
            if followed:
                return self.switches[index].to
        return self.before

    def settled(self) -> str:
        """The side every node ends on."""
        return self.switches[-1].to if self.switches else self.before

    def active(self, now: float) -> bool:
        """Whether a node may still be on another side than
        :meth:`settled`."""
        return now < self.ends_at

    def pending(self, node_key: bytes, now: float) -> list[Move]:
        """The node's changes of side still to come, in order."""
        node_hash = rendezvous.hash64(node_key)
        moments = []
        for hashed, at, scale, stop in self._hashed:
            moment = at
            if scale != math.inf:
                moment += rendezvous.weight(node_hash, hashed) / scale
            if now < moment < stop:
                moments.append(moment)
        moments.sort()
        moves = []
        where = self._side(node_hash, now)
        for moment in moments:
            there = self._side(node_hash, moment + _AFTER)
            if there != where:
                moves.append(Move(moment, where, there))
                where = there
        return moves
