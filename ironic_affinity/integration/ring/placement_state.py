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

"""One immutable picture of who may take nodes, swapped in one assignment.

Ironic asks for a ring on every node lookup, from many threads. Its own
manager answers from one tuple read without a lock and replaced whole
when it expires. Ours does the same with :class:`PlacementState`: the
member view it was built from, Ironic's active conductors, the placements,
and the rings built from them. Readers take ``states.current()`` and use
that one object to the end of their lookup, so no lookup mixes the
membership of one moment with the conductors of another. A rebuild
happens under a lock, and only when the view's version has moved or the
active conductors are due again, as Ironic's
``hash_ring_reset_interval`` says. ``reset()`` makes them due at once,
whatever the clock.

With SQLite, Ironic never re-reads its active conductors once it has
them (it keeps its ring static to limit database locking, and runs no
heartbeats that would change them); nor do we, until ``reset()``. The
member view still applies: a conductor that leaves the group is taken
out of placement at once, which is what this plugin is for.
"""

from collections.abc import Callable
import dataclasses
import threading
import time
from typing import Any
from typing import Protocol
from typing import TypeVar

from ironic_affinity import active_members
from ironic_affinity import adoption
from ironic_affinity import placement
from ironic_affinity.membership import view_snapshot

T = TypeVar('T')

ActiveReader = Callable[[], active_members.ActiveConductors]
#: Told, at each rebuild, the conductors Ironic lists that the group
#: lacks, whether the view could be read, and whether Ironic's ring may
#: route nodes to them (a node on its side of a switch).
MissingObserver = Callable[[frozenset[str], bool, bool], None]

# How long a rebuild waits for the group when Ironic lists a conductor
# the view has not seen. Short: lookups of every thread wait for it.
GAP_READ_SECONDS = 2.0


# eq=False: states are compared by identity; their placements are large.
@dataclasses.dataclass(frozen=True, eq=False)
class PlacementState:
    """The members, Ironic's active conductors and the placements built
    from them, at one moment. Never changed once published, except for the
    ring memo, which holds only what these fields determine."""

    members: view_snapshot.Snapshot
    # 'group:hardware_type' -> conductor names, as Ironic lists them.
    active: dict[str, frozenset[str]]
    # clock() when ``active`` was read; None once reset() made it due.
    read_at: float | None
    # By ``use_groups``: a ring built without groups judges every node and
    # conductor as group '', over every active conductor.
    placements: dict[bool, placement.Placement]
    ungrouped: dict[str, frozenset[str]]
    # Between Ironic's ring and affinity placement: which side each node
    # is on, agreed from the members' votes (ironic_affinity.adoption).
    agreement: adoption.Agreement
    _rings: dict[Any, Any] = dataclasses.field(
        default_factory=dict, init=False, compare=False, repr=False
    )

    def hosts(
        self, driver: str, group: str, use_groups: bool
    ) -> frozenset[str]:
        """Who Ironic lists as active for this hardware type (and group)."""
        if use_groups:
            return self.active.get('%s:%s' % (group, driver), frozenset())
        return self.ungrouped.get(driver, frozenset())

    def live(
        self, driver: str, group: str, use_groups: bool
    ) -> frozenset[str]:
        """Of those, the ones that are in the affinity group."""
        return (
            self.hosts(driver, group, use_groups) & self.members.members.keys()
        )

    def memo(self, key: Any, build: Callable[[], T]) -> T:
        """``build()``, once per key for this state.

        Two threads may build the same key at once; both results come
        from this state alone, so whichever is kept is the same ring.
        """
        try:
            return self._rings[key]  # type: ignore[no-any-return]
        except KeyError:
            built = build()
            self._rings[key] = built
            return built


def build(
    members: view_snapshot.Snapshot,
    active: active_members.ActiveConductors,
    read_at: float | None,
    previous: adoption.Agreement | None = None,
) -> PlacementState:
    """A state from a view and Ironic's active conductors."""
    grouped = {key: frozenset(hosts) for key, hosts in active.items()}
    ungrouped = active_members.without_groups(grouped)
    placements = {
        True: placement.Placement(
            active_members.profiles(members.members, grouped)
        ),
        False: placement.Placement(
            active_members.profiles(members.members, ungrouped)
        ),
    }
    return PlacementState(
        members=members,
        active=grouped,
        read_at=read_at,
        placements=placements,
        ungrouped=ungrouped,
        agreement=agreement_of(members, grouped, previous),
    )


def agreement_of(
    members: view_snapshot.Snapshot,
    active: active_members.ActiveConductors,
    previous: adoption.Agreement | None = None,
) -> adoption.Agreement:
    """Where the deployment stands between Ironic's ring and affinity
    placement (ironic_affinity.adoption), from a view and Ironic's active
    conductors."""
    if members.read_at is None:
        # The group never read: no vote is known, and an empty group
        # would read as "Ironic's ring". Placing by affinity with no
        # members places nothing, which breaks no hard tag.
        return adoption.UNREAD
    return active_members.agreement(members.members, active, previous)


def _reported(agreement: adoption.Agreement) -> tuple[object, ...]:
    """What an operator is told of an agreement: its switches and the
    side due."""
    return (
        agreement.adoption.switches,
        agreement.adoption.before,
        agreement.target,
        agreement.due,
    )


class MemberSource(Protocol):
    """What :class:`PlacementStates` needs of a member view."""

    def snapshot(self) -> view_snapshot.Snapshot: ...

    def refresh_within(self, seconds: float) -> view_snapshot.Snapshot: ...


class PlacementStates:
    """The current :class:`PlacementState` of a process."""

    def __init__(
        self,
        members: MemberSource,
        read_active: ActiveReader,
        reset_interval: Callable[[], float],
        static: bool = False,
        on_missing: MissingObserver | None = None,
        on_agreement: Callable[[adoption.Agreement], None] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """:param read_active: Ironic's active conductors, read now.
        :param reset_interval: seconds the active conductors are good
            for (Ironic's ``hash_ring_reset_interval``, read each time so
            that a reload applies).
        :param static: never re-read them but after reset(), as Ironic
            does on SQLite.
        """
        self._members = members
        self._read_active = read_active
        self._reset_interval = reset_interval
        self._static = static
        self._on_missing = on_missing
        # Told when the switches or the side due change (for the log).
        self._on_agreement = on_agreement
        self._clock = clock
        self._lock = threading.Lock()
        self._state: PlacementState | None = None
        # Conductors Ironic lists that the group lacked when we last read
        # the group for that reason: read once per such set, not at every
        # rebuild while a conductor runs without the plugin.
        self._gap_read_for: frozenset[str] = frozenset()

    def current(self) -> PlacementState:
        """The state to answer a lookup from; rebuilt first when stale."""
        state = self._state  # one read: the lock-free path
        if state is not None and self._up_to_date(state):
            return state
        with self._lock:
            state = self._state
            if state is None or not self._up_to_date(state):
                state = self._rebuild(state)
                self._state = state
            return state

    def latest(self) -> PlacementState | None:
        """The state last built, as it is: no reading, no waiting (for a
        heartbeat, which must not wait on the database)."""
        return self._state

    def fresh(self) -> PlacementState:
        """A state from conductors read now, not kept: Ironic's
        ``cache=False``."""
        latest = self._state
        return build(
            self._members.snapshot(),
            self._read_active(),
            self._clock(),
            None if latest is None else latest.agreement,
        )

    def reset(self) -> None:
        """Read Ironic's active conductors again at the next lookup."""
        with self._lock:
            if self._state is not None:
                self._state = dataclasses.replace(self._state, read_at=None)

    def _due(self, state: PlacementState) -> bool:
        if state.read_at is None:
            return True
        if self._static:
            return False
        return state.read_at < self._clock() - self._reset_interval()

    def _up_to_date(self, state: PlacementState) -> bool:
        return (
            state.members.version == self._members.snapshot().version
            and not self._due(state)
        )

    def _rebuild(self, old: PlacementState | None) -> PlacementState:
        members = self._members.snapshot()
        if old is None or self._due(old):
            active = self._read_active()
            read_at: float | None = self._clock()
        else:
            active, read_at = old.active, old.read_at
        missing = active_members.missing_from_group(members.members, active)
        if missing and not missing <= self._gap_read_for:
            # Ironic lists a conductor our view has not seen. A conductor
            # joins the group before Ironic lists it, so this is most
            # often our view being up to one watch interval behind: read
            # the group now rather than answer without the conductor.
            self._gap_read_for = missing
            members = self._members.refresh_within(GAP_READ_SECONDS)
            missing = active_members.missing_from_group(
                members.members, active
            )
        elif not missing:
            self._gap_read_for = frozenset()
        if (
            old is not None
            and old.members.version == members.version
            and old.active == active
        ):
            # Nothing that placement reads has changed: keep the
            # placements and their memo.
            built = dataclasses.replace(old, members=members, read_at=read_at)
        else:
            built = build(
                members,
                active,
                read_at,
                None if old is None else old.agreement,
            )
            if self._on_agreement is not None and (
                old is None
                or _reported(old.agreement) != _reported(built.agreement)
            ):
                self._on_agreement(built.agreement)
        if self._on_missing is not None:
            switches = built.agreement.adoption
            self._on_missing(
                missing,
                members.stale,
                switches.all_on(time.time()) != adoption.AFFINITY,
            )
        return built
