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
Ironic's ring) is therefore paced by the rule that paces a conductor's change
(:mod:`ironic_affinity.schedule`), keyed by the switch: each node
follows it at its own moment. Every process computes the same side for
a node from the switches and the clock alone.

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
from collections.abc import Mapping
import dataclasses
import math
from typing import Protocol

from ironic_affinity import rendezvous
from ironic_affinity import schedule
from ironic_affinity._i18n import _


class KeyedNode(Protocol):
    """A node as the rings key it (profile.NodeRequest is one; profile
    imports this module, so it is named by its shape here)."""

    @property
    def hash_key(self) -> bytes: ...

    @property
    def created_at(self) -> float | None: ...


STOCK = 'stock'
AFFINITY = 'affinity'
SIDES = (STOCK, AFFINITY)
# When the deployment's first known side starts: before any published
# time (capabilities refuse earlier ones), and the same in every process.
ORIGIN_AT = 1e9


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
        return schedule.change_key('switch', self.to, at=self.at)


class Adoption:
    """Which side each node is on, over a list of switches."""

    def __init__(self, switches: Iterable[Switch], before: str = STOCK):
        """:param switches: the switches, oldest first.
        :param before: the side before the oldest switch.
        """
        # By time; two at one moment in a fixed order, whatever the order
        # they were read in.
        ordered = tuple(sorted(switches, key=lambda s: (s.at, s.to, s.period)))
        self.switches = ordered[-schedule.MAX_KEPT :]
        # A switch dropped from the front has finished before the ones
        # kept started (they are published in order): every node is on
        # its side.
        self.before = (
            before
            if len(ordered) <= schedule.MAX_KEPT
            else ordered[-schedule.MAX_KEPT - 1].to
        )
        self._sides = (self.before,) + tuple(s.to for s in self.switches)
        self._schedule = schedule.Schedule(
            ((s.hashed(), s.at, s.period) for s in self.switches),
            stop_at_next=True,
        )
        self.ends_at = self._schedule.ends_at

    def side(
        self, node_key: bytes, now: float, created_at: float | None = None
    ) -> str:
        """The side the node is on at ``now``.

        :param created_at: when the node was created, if known: a node
            created after a switch began is on its side from the start
            (no conductor held it on the other).
        """
        return self._side(rendezvous.hash64(node_key), now, created_at)

    def _side(
        self, node_hash: int, now: float, created_at: float | None = None
    ) -> str:
        return self._sides[self._schedule.stage(node_hash, now, created_at)]

    def final_side(self) -> str:
        """The side every node ends on."""
        return self._sides[-1]

    def active(self, now: float) -> bool:
        """Whether a node may still be on another side than
        :meth:`final_side`."""
        return now < self.ends_at

    def all_on(self, now: float) -> str | None:
        """The side every node is on at ``now``; None while a switch may
        still hold some on each side."""
        return None if self.active(now) else self.final_side()

    def side_of(self, node: KeyedNode, now: float) -> str:
        """:meth:`side` of a node as the rings key it, with its creation
        time."""
        return self.side(node.hash_key, now, node.created_at)

    def pending_of(
        self, node: KeyedNode, now: float
    ) -> list[schedule.Move[str]]:
        """:meth:`pending` of a node as the rings key it, with its
        creation time."""
        return self.pending(node.hash_key, now, node.created_at)

    def pending(
        self, node_key: bytes, now: float, created_at: float | None = None
    ) -> list[schedule.Move[str]]:
        """The node's changes of side still to come, in order."""
        node_hash = rendezvous.hash64(node_key)
        return schedule.moves(
            self._schedule.moments(node_hash, now, created_at),
            now,
            lambda moment: self._side(node_hash, moment, created_at),
        )


@dataclasses.dataclass(frozen=True)
class Vote:
    """The side one conductor asks for (its ``hash_ring_manager``), since
    when, and the period it gives a switch it starts."""

    side: str
    since: float
    period: float

    def __post_init__(self) -> None:
        # Checked as a switch is: the side and the period.
        Switch(self.side, self.since, self.period)


@dataclasses.dataclass(frozen=True)
class Published:
    """What a member publishes about the switch: its vote, and the
    switches it knows of, so that the history outlives any one member."""

    vote: Vote
    switches: tuple[Switch, ...] = ()


@dataclasses.dataclass(frozen=True)
class Agreement:
    """What every process derives from the same members."""

    adoption: Adoption
    # The side the deployment goes to. While it differs from the newest
    # recorded switch's (``due``), ``recorder`` records a switch to it.
    target: str
    # The history members publish (empty while the deployment's side is
    # only inferred and nothing needs recording, see :func:`agree`).
    record: tuple[Switch, ...]
    due: bool
    recorder: str | None
    # Members that vote for Ironic's ring, and conductors active in
    # Ironic that are not members, by name: what holds the deployment on
    # Ironic's ring, for operators.
    stock_voters: frozenset[str]
    outsiders: frozenset[str]


#: Before any member has been read: affinity placement, which then places
#: nothing, rather than a guess.
UNREAD = Agreement(
    adoption=Adoption((), before=AFFINITY),
    target=AFFINITY,
    record=(),
    due=False,
    recorder=None,
    stock_voters=frozenset(),
    outsiders=frozenset(),
)


def merged(switches: Iterable[Switch]) -> tuple[Switch, ...]:
    """Every member's switches as one history: each once, by time, the
    newest :data:`schedule.MAX_KEPT`."""
    return Adoption(set(switches)).switches


def agree(
    votes: Mapping[str, Published | None],
    outsiders: Iterable[str],
    previous: Agreement | None = None,
) -> Agreement:
    """Where the deployment stands, from its members alone.

    :param votes: every member by name, with what it published; None for
        a member that publishes no vote (a conductor that has only ever
        placed by affinity): it places by affinity.
    :param outsiders: conductors Ironic lists as active that are not
        members (they run Ironic's own commands, or lost the backend).
    :param previous: what this process agreed last. With no member at
        all, it stands: every conductor may have lost the backend at
        once, which is no vote, and the history went with them.

    Nodes follow the recorded switches only, the members' published
    history. The deployment goes to:

    * Ironic's ring while any member votes for it;
    * affinity once the history says so, whoever is missing (a member
      that lost the backend is a conductor down, not a vote);
    * else Ironic's ring while no member votes affinity, or while a
      conductor active in Ironic is not a member (it does not run the
      plugin yet);
    * else affinity.

    When that differs from the newest recorded switch, a switch is due,
    and one member records it (:func:`recorded`): the first by name of
    those that publish a history, so that two do not record two.

    Without a history, the deployment has been on affinity if members
    vote for it and no active conductor is missing, or if members vote
    for it and none votes for Ironic's ring (a deployment that has only
    ever placed by affinity, so recorded no history, one of whose
    conductors is down); else on Ironic's ring. That side is taken as it
    is, since it is where nodes are: nothing moves. It is recorded once a
    member votes for Ironic's ring, so that the later switch to affinity
    is paced; until then nothing is published.
    """
    outside = frozenset(outsiders)
    if not votes and previous is not None:
        return dataclasses.replace(previous, outsiders=outside)
    known = merged(
        s for p in votes.values() if p is not None for s in p.switches
    )
    stock_votes = frozenset(
        name
        for name, p in votes.items()
        if p is not None and p.vote.side == STOCK
    )
    affinity_votes = frozenset(votes) - stock_votes
    if known:
        last = known[-1].to
        record = known
        if stock_votes:
            target = STOCK
        elif last == AFFINITY:
            target = AFFINITY
        elif not affinity_votes or outside:
            target = STOCK
        else:
            target = AFFINITY
    else:
        if affinity_votes and (not outside or not stock_votes):
            last = AFFINITY
        else:
            last = STOCK
        target = STOCK if stock_votes else last
        known = (Switch(last, ORIGIN_AT, 0.0),)
        record = known if stock_votes else ()
    publishing = [n for n, p in votes.items() if p is not None]
    return Agreement(
        adoption=Adoption(known, before=known[0].to),
        target=target,
        record=record,
        due=target != last,
        recorder=min(publishing or votes, default=None),
        stock_voters=stock_votes,
        outsiders=outside,
    )


def recorded(
    agreement: Agreement,
    member: str,
    published: Iterable[Switch],
    now: float,
    lead: float,
    period: float,
    repace: bool = False,
) -> tuple[Switch, ...]:
    """The history ``member`` publishes at ``now``.

    :param published: what it published last: kept until every member
        has it, so that a switch it recorded is not recorded again while
        its own view has not caught up.
    :param lead: seconds from recording a switch to its start, longer
        than any process takes to read it (a member timeout): every
        process knows of a switch before its first node moves.
    :param period: the member's ``[affinity]adoption_period``.
    :param repace: the period was set by the operator: a running switch
        with another period is recorded again from ``now + lead`` with
        this one, so that the nodes still to move move at the new pace.
    """
    history = merged(tuple(agreement.record) + tuple(published))
    if agreement.recorder != member or not history:
        return history
    last = history[-1]
    start = now + lead
    if agreement.target != last.to:
        return merged(history + (Switch(agreement.target, start, period),))
    if repace and last.period != period and start < last.ends_at():
        return merged(history + (Switch(last.to, start, period),))
    return history


def takeover_period(
    nodes: int, conductors: int, per_run: int, interval: float
) -> float:
    """The shortest switch over which Ironic keeps up with its takeovers.

    With ``conductors`` conductors, a switch moves about (C-1)/C of the
    nodes (Ironic's ring and tags have nothing in common), and each
    conductor receives 1/C of those. A conductor takes over at most
    ``per_run`` nodes (``[conductor]periodic_max_workers``) each
    ``interval`` (``[conductor]sync_local_state_interval``).
    """
    if conductors <= 1 or nodes <= 0 or per_run <= 0 or interval <= 0:
        return 0.0
    received = nodes * (conductors - 1) / conductors / conductors
    return math.ceil(received / per_run) * float(interval)
