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

"""Value objects: what the engine knows of a conductor and of a node."""

from collections.abc import Iterable
from collections.abc import Mapping
import dataclasses
import types

from ironic_affinity import adoption
from ironic_affinity import exception
from ironic_affinity import tags
from ironic_affinity._i18n import _

# The names of the four conductor tag lists, as options and scenario keys.
HARD_AFFINITY = 'hard_affinity_tags'
HARD_ANTI_AFFINITY = 'hard_anti_affinity_tags'
SOFT_AFFINITY = 'soft_affinity_tags'
SOFT_ANTI_AFFINITY = 'soft_anti_affinity_tags'
# Larger than any deployment: a bound on max_nodes wherever it is read
# (configuration, scenario, a published entry), so that no number is
# costly to print or compare.
MAX_NODES_LIMIT = 10**9
# The newest format level of what processes publish that this release
# reads (membership/levels.py); level 2 adds a conductor's drain.
FORMAT_LEVEL = 2
# NodeRequest.tags hides the tags module inside that class.
_TagList = tags.TagList

TAG_OPTIONS = (
    HARD_AFFINITY,
    HARD_ANTI_AFFINITY,
    SOFT_AFFINITY,
    SOFT_ANTI_AFFINITY,
)


@dataclasses.dataclass(frozen=True)
class ConductorProfile:
    """A conductor as placement sees it: its name, tags and constraints.

    Build one from raw tag lists with :meth:`build`; the constructor takes
    parsed ones. Either refuses a tag in both hard lists.
    """

    name: str
    hard_affinity_tags: frozenset[str] = frozenset()
    hard_anti_affinity_tags: frozenset[str] = frozenset()
    soft_affinity_tags: Mapping[str, int] = dataclasses.field(
        default_factory=dict, hash=False
    )
    soft_anti_affinity_tags: Mapping[str, int] = dataclasses.field(
        default_factory=dict, hash=False
    )
    # None means every hardware type: an offline scenario need not list them.
    hardware_types: frozenset[str] | None = None
    conductor_group: str = ''
    # The most nodes the conductor takes while others have room (see
    # ironic_affinity.capacity); 0 is no limit.
    max_nodes: int = 0
    # Draining: it takes a node only when no other eligible conductor
    # may (see ironic_affinity.engine), and hands its others over.
    draining: bool = False
    # Earlier profiles that nodes still follow, oldest first, while their
    # changes roll out (see ironic_affinity.rollout).
    changes: tuple['ProfileChange', ...] = ()
    # Its vote between Ironic's ring and affinity placement, and the
    # switches it knows of (ironic_affinity.adoption); None when it
    # publishes none. Not part of the signature: no verdict depends on it.
    switching: adoption.Published | None = None

    @classmethod
    def build(
        cls,
        name: str,
        hard_affinity_tags: _TagList = None,
        hard_anti_affinity_tags: _TagList = None,
        soft_affinity_tags: _TagList = None,
        soft_anti_affinity_tags: _TagList = None,
        hardware_types: Iterable[str] | None = None,
        conductor_group: str | None = None,
        max_nodes: int = 0,
        where: str = '',
        draining: bool = False,
    ) -> 'ConductorProfile':
        """Parse raw tag lists into a checked profile.

        :param where: prefixes the option names in error messages, e.g. a
            scenario file and entry.
        :raises: InvalidTag for a list outside the tag grammar,
            ConflictingTags when a tag is in both hard lists, InvalidCapacity
            for a negative or non-integer ``max_nodes``.
        """
        prefix = where + ': ' if where else ''
        profile = cls(
            name=name,
            hard_affinity_tags=tags.parse_tags(
                hard_affinity_tags, prefix + HARD_AFFINITY
            ),
            hard_anti_affinity_tags=tags.parse_tags(
                hard_anti_affinity_tags, prefix + HARD_ANTI_AFFINITY
            ),
            soft_affinity_tags=tags.parse_weighted_tags(
                soft_affinity_tags, prefix + SOFT_AFFINITY
            ),
            soft_anti_affinity_tags=tags.parse_weighted_tags(
                soft_anti_affinity_tags, prefix + SOFT_ANTI_AFFINITY
            ),
            hardware_types=(
                None if hardware_types is None else frozenset(hardware_types)
            ),
            conductor_group=(conductor_group or '').lower(),
            max_nodes=max_nodes,
            draining=draining,
        )
        return profile

    def __post_init__(self) -> None:
        # Frozen all the way down: a caller's dict must not change us.
        for field in (SOFT_AFFINITY, SOFT_ANTI_AFFINITY):
            weights = types.MappingProxyType(dict(getattr(self, field)))
            object.__setattr__(self, field, weights)
        # bool is an int to Python, never a capacity to an operator.
        if (
            not isinstance(self.max_nodes, int)
            or isinstance(self.max_nodes, bool)
            or not 0 <= self.max_nodes <= MAX_NODES_LIMIT
        ):
            raise exception.InvalidCapacity(
                _(
                    'conductor %(name)s: max_nodes must be a whole number '
                    'of nodes up to %(limit)d, 0 for no limit, not %(value)r'
                )
                % {
                    'name': self.name,
                    'limit': MAX_NODES_LIMIT,
                    'value': self.max_nodes,
                }
            )
        # A tag in both hard lists would make the conductor refuse every
        # node carrying it and every node lacking it: refuse the conductor.
        both = self.hard_affinity_tags & self.hard_anti_affinity_tags
        if both:
            raise exception.ConflictingTags(
                _(
                    'conductor %(name)s could never accept a node: '
                    '%(tags)s in both %(hard)s and %(anti)s'
                )
                % {
                    'name': self.name,
                    'tags': ', '.join(sorted(both)),
                    'hard': HARD_AFFINITY,
                    'anti': HARD_ANTI_AFFINITY,
                }
            )

    def without_changes(self) -> 'ConductorProfile':
        """This profile without the changes still rolling out."""
        if not self.changes:
            return self
        return dataclasses.replace(self, changes=())

    def soft_conflicts(self) -> frozenset[str]:
        """Tags in both soft lists: anti-affinity wins, which is worth a
        warning since the affinity entry then has no effect."""
        return frozenset(self.soft_affinity_tags) & frozenset(
            self.soft_anti_affinity_tags
        )

    def mentioned_tags(self) -> frozenset[str]:
        """Every tag of its four lists: the tags that affect it."""
        return (
            self.hard_affinity_tags
            | self.hard_anti_affinity_tags
            | frozenset(self.soft_affinity_tags)
            | frozenset(self.soft_anti_affinity_tags)
        )

    def signature(self) -> tuple[object, ...]:
        """Everything but the name: conductors with equal signatures get
        equal verdicts, so the engine scores each signature once."""
        return (
            self.hard_affinity_tags,
            self.hard_anti_affinity_tags,
            tuple(sorted(self.soft_affinity_tags.items())),
            tuple(sorted(self.soft_anti_affinity_tags.items())),
            self.hardware_types,
            self.conductor_group,
            self.draining,
        )


@dataclasses.dataclass(frozen=True)
class ProfileChange:
    """One change of a conductor's profile that nodes follow gradually:
    each node at its own moment within ``period`` seconds from ``at``."""

    # The profile before the change; None when the change is the
    # conductor joining the group.
    before: ConductorProfile | None
    # Seconds since the epoch, on the clock of the conductor that changed.
    at: float
    period: float

    def ends_at(self) -> float:
        return self.at + self.period


# slots: a process under capacity holds one per node while it computes.
@dataclasses.dataclass(frozen=True, slots=True)
class NodeRequest:
    """A node to place: its identity, tags and Ironic constraints."""

    name: str
    tags: frozenset[str] = frozenset()
    uuid: str | None = None
    # None means "any hardware type", for offline scenarios.
    driver: str | None = None
    conductor_group: str = ''
    # When the node was created (Ironic's created_at, seconds since the
    # epoch); None when unknown. A change or switch that began before it
    # has nothing to move: the node follows it at once (rollout.py).
    created_at: float | None = None

    @classmethod
    def build(
        cls,
        name: str,
        affinity_tags: _TagList = None,
        uuid: str | None = None,
        driver: str | None = None,
        conductor_group: str | None = None,
        where: str = '',
    ) -> 'NodeRequest':
        """Parse a node's raw tag list.

        :raises: InvalidTag naming ``where`` and the bad tag.
        """
        prefix = where + ': ' if where else ''
        return cls(
            name=name,
            tags=tags.parse_tags(affinity_tags, prefix + 'affinity_tags'),
            uuid=uuid,
            driver=driver,
            conductor_group=(conductor_group or '').lower(),
        )

    @property
    def hash_key(self) -> bytes:
        """What consistent hashing hashes: the uuid, as Ironic hashes it,
        or the name where a scenario gives no uuid."""
        return (self.uuid or self.name).encode('utf-8')

    @property
    def constraints(self) -> tuple[frozenset[str], str | None, str]:
        """Everything placement reads except identity. Nodes with equal
        constraints get equal verdicts and differ only in the tie-break."""
        return (self.tags, self.driver, self.conductor_group)
