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

"""Options of the [affinity] group of ironic.conf.

Nothing here runs at import time: callers register the options on the
configuration object they own, as oslo.config recommends for libraries.
"""

from typing import Any

from oslo_config import cfg
from oslo_config import types

from ironic_affinity import profile
from ironic_affinity import tags
from ironic_affinity._i18n import _

GROUP = cfg.OptGroup(
    'affinity',
    title=_('Node affinity placement'),
    help=_(
        'Tag-based placement of nodes onto conductors. The four tag lists '
        'describe this conductor; a node\'s tags are matched against them. '
        'Tag lists are separated by commas and/or spaces; tags are letters, '
        'digits, ".", "_" and "-", up to %(len)d characters, compared '
        'case-insensitively; at most %(max)d tags a list.'
    )
    % {'len': tags.MAX_TAG_LENGTH, 'max': tags.MAX_TAGS},
)


class TagListType(types.ConfigType):
    """An oslo.config type for one tag list, checked against the grammar.

    A value outside the grammar makes oslo.config refuse it with an error
    naming the option, before any node is placed.
    """

    def __init__(self, weighted: bool) -> None:
        super().__init__(
            type_name='weighted tag list' if weighted else 'tag list'
        )
        self.weighted = weighted

    def __call__(self, value: Any) -> Any:
        if isinstance(value, (dict, frozenset)):
            return value  # already parsed, e.g. a default
        # oslo.config adds the option name and source to this message.
        if self.weighted:
            return tags.parse_weighted_tags(value, _('tag list'))
        return tags.parse_tags(value, _('tag list'))

    def _formatter(self, value: Any) -> str:
        if isinstance(value, dict):
            return tags.format_weighted(value)
        return ', '.join(sorted(value))

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, TagListType) and other.weighted == self.weighted
        )

    def __hash__(self) -> int:
        return hash((type(self), self.weighted))


def _tag_opt(name: str, weighted: bool, help_text: str) -> cfg.Opt:
    # mutable: a SIGHUP reloads a conductor's tags without a restart.
    return cfg.Opt(
        name,
        type=TagListType(weighted),
        default=({} if weighted else frozenset()),
        sample_default='',
        mutable=True,
        help=help_text,
    )


TAG_OPTS = [
    _tag_opt(
        profile.HARD_AFFINITY,
        False,
        _(
            'Tags a node must all carry to be placed on this conductor, '
            'e.g. the datacenter it stands in. A node lacking any of them '
            'is never placed here.'
        ),
    ),
    _tag_opt(
        profile.HARD_ANTI_AFFINITY,
        False,
        _(
            'Tags that keep a node off this conductor: a node carrying any '
            'of them is never placed here, e.g. a network this conductor '
            'cannot reach. A tag may not also be in hard_affinity_tags.'
        ),
    ),
    _tag_opt(
        profile.SOFT_AFFINITY,
        True,
        _(
            'Tags that make this conductor preferred: each one a node '
            'carries adds its weight to this conductor\'s score. Write '
            '"tag:WEIGHT" for a weight from 1 to 1000; the default is 1. '
            'The node goes to the highest-scoring eligible conductor.'
        ),
    ),
    _tag_opt(
        profile.SOFT_ANTI_AFFINITY,
        True,
        _(
            'Tags that make this conductor less preferred: each one a node '
            'carries subtracts its weight from this conductor\'s score. '
            'A tag also in soft_affinity_tags counts here only.'
        ),
    ),
]

CAPACITY_OPTS = [
    cfg.IntOpt(
        'max_nodes',
        default=0,
        min=0,
        max=profile.MAX_NODES_LIMIT,
        mutable=True,
        help=_(
            'The most nodes this conductor takes while other conductors a '
            'node may use have room; 0, the default, is no limit. A node '
            'whose preferred conductor is full goes to the next conductor '
            'of its fallback order with room; a full conductor keeps the '
            'nodes that have no other conductor, then those that score it '
            'highest. When every conductor a node may use is full, the '
            'node still goes to its first choice, beyond its max_nodes, and '
            'that is logged and reported by "ironic-affinity check". '
            'Published to every process with the tags.'
        ),
    ),
    cfg.BoolOpt(
        'drain',
        default=False,
        mutable=True,
        help=_(
            'Empty this conductor before maintenance: while true, it takes '
            'a node only when no other conductor may (by hard tags, '
            'conductor group and hardware types), and its other nodes move '
            'away over rebalance_period, as for any change of this '
            'conductor. Needs format level 2: while pin_format is 1 it is '
            'not published, and has no effect.'
        ),
    ),
]

REBALANCE_OPTS = [
    cfg.IntOpt(
        'rebalance_period',
        default=0,
        min=0,
        max=7 * 24 * 3600,
        mutable=True,
        help=_(
            'Seconds over which the moves that follow a change of this '
            'conductor are spread: when its tags are reloaded, or when it '
            'joins the group, each node that will move for a better score '
            'or to this conductor moves at its own moment within the '
            'period, the same in every process. 0, the default, moves them '
            'all at once. Moves that must happen are never delayed: a node '
            'whose conductor left the group, or no longer accepts it by '
            'its hard tags, conductor group or hardware types, moves at '
            'once. While any conductor sets max_nodes, each node that '
            'moves goes once, straight to where it ends, at its own moment, '
            'and a node arriving at a full conductor moves the next one due '
            'to leave it at that moment, so that max_nodes holds '
            'throughout. Published with the tags while a change rolls out.'
        ),
    ),
    cfg.IntOpt(
        'adoption_period',
        min=0,
        max=7 * 24 * 3600,
        mutable=True,
        help=_(
            'Seconds over which nodes move when the deployment switches '
            'between Ironic\'s hash ring and affinity placement: when the '
            'last conductor that voted for Ironic\'s ring (hash_ring_manager '
            '= stock) turns to affinity, or the first one turns back. Each '
            'node moves at its own moment within the period, the same in '
            'every process. The period of the conductor that records the '
            'switch, the first by name, applies: set the same on every '
            'conductor. A new value set there while a switch runs applies '
            'to the nodes still to move. Unset, the default: sized so that '
            'Ironic keeps up with the takeovers, i.e. the nodes each '
            'conductor receives divided by [conductor]periodic_max_workers, '
            'times [conductor]sync_local_state_interval. 0 moves them all at '
            'once. Moves that must happen are never delayed: a node whose '
            'conductor left the group, or whose hard tags rule it out, '
            'moves at once.'
        ),
    ),
]

MEMBERSHIP_OPTS = [
    cfg.StrOpt(
        'backend_url',
        secret=True,
        sample_default='file://$state_path/affinity-membership',
        help=_(
            'tooz URL of the coordination backend where conductors publish '
            'their affinity profiles and watch each other, e.g. '
            'redis://:PASSWORD@HOST:6379, etcd3+http://HOST:2379 or '
            'zookeeper://HOST:2181. Every conductor and API service of a '
            'deployment must use the same backend. Unset, the file driver '
            'under Ironic\'s [DEFAULT]state_path is used, which works only '
            'when all services run on one host. The URL may hold a '
            'password: it is never logged.'
        ),
    ),
    cfg.StrOpt(
        'group_name',
        default='ironic-affinity-conductors',
        help=_('Name of the tooz group the conductors join.'),
    ),
    cfg.FloatOpt(
        'heartbeat_interval',
        default=1.0,
        min=0.1,
        help=_(
            'Seconds between two heartbeats of a conductor to the '
            'backend. Keep it well below member_timeout; a conductor '
            'whose member_timeout is not more than twice this is refused '
            'at start.'
        ),
    ),
    cfg.FloatOpt(
        'watch_interval',
        default=1.0,
        min=0.1,
        help=_(
            'Seconds between two reads of the group by every process that '
            'places nodes. A change of membership or tags is seen within '
            'about this long after the backend shows it.'
        ),
    ),
    cfg.IntOpt(
        'member_timeout',
        default=5,
        min=2,
        help=_(
            'Seconds after its last heartbeat that a conductor is dropped '
            'from the group, i.e. how long a dead conductor keeps its '
            'nodes. Passed to the tooz driver as its "timeout" unless the '
            'backend URL sets one (for ZooKeeper it is the session '
            'timeout, which the server may bound). Members are kept for '
            'twice this long after the backend comes back from an outage, '
            'so that live conductors can rejoin before anything is '
            're-placed.'
        ),
    ),
    cfg.IntOpt(
        'pin_format',
        min=1,
        max=profile.FORMAT_LEVEL,
        mutable=True,
        help=_(
            'During a rolling upgrade of this plugin: the format level of '
            'what this process publishes, set to the level the oldest '
            'release still running reads ("ironic-affinity members" shows '
            'each process\'s). What a newer level adds, e.g. drain, is then '
            'not published, so older processes place nodes as this one '
            'does. Unset, the default: the newest level this release reads '
            '(%(level)d). Upgrade every process with the pin set, then lift '
            'it, then use what is new.'
        )
        % {'level': profile.FORMAT_LEVEL},
    ),
]


IRONIC_OPTS = [
    cfg.StrOpt(
        'hash_ring_manager',
        default='affinity',
        choices=[
            ('affinity', _('place nodes by affinity tags')),
            (
                'stock',
                _(
                    "keep Ironic's own hash ring, to roll back without "
                    'uninstalling'
                ),
            ),
        ],
        help=_(
            'A conductor\'s vote, read when it starts: "affinity" to place '
            'nodes by affinity tags, "stock" for Ironic\'s own hash ring. '
            'Every process places nodes as the conductors\' votes agree: '
            'by Ironic\'s ring while any conductor votes "stock", the '
            'switch paced by adoption_period. API services do not read it.'
        ),
    ),
    cfg.StrOpt(
        'node_tags_key',
        default='affinity_tags',
        help=_(
            'Key of the node "extra" field that holds a node\'s affinity '
            'tags, as a list or a comma/space separated string.'
        ),
    ),
    cfg.FloatOpt(
        'node_tags_interval',
        default=2.0,
        min=0.1,
        help=_(
            'Seconds between two refreshes of node tags by every process '
            'that places nodes. Each reads an index of the published tags '
            'from the coordination backend, and the parts of it that '
            'changed; the one process that reads Ironic\'s database for the '
            'whole deployment (whoever holds a lock on the backend) reads '
            'the nodes that API processes noted as written. A change made '
            'through Ironic\'s API is in every process within about twice '
            'this long.'
        ),
    ),
    cfg.FloatOpt(
        'node_tags_rescan_interval',
        default=120.0,
        min=1.0,
        help=_(
            'Seconds between two full reads of every node\'s tags by the '
            'one process that reads Ironic\'s database for the deployment: '
            'how changes written elsewhere than through Ironic\'s API '
            '(inspection rules, a direct database edit) and nodes deleted '
            'by name are seen, i.e. the bound on how stale a node\'s tags '
            'can be, plus one full read and one node_tags_interval.'
        ),
    ),
    cfg.FloatOpt(
        'metrics_interval',
        default=60.0,
        min=1.0,
        help=_(
            'Seconds between two reports of placement metrics, sent through '
            'Ironic\'s metrics framework when its [metrics] backend is not '
            '"noop". For each report, every process that reports (API '
            'processes, and conductors with the collector backend) places '
            'every node, from the nodes its tag cache holds, and reads the '
            'uuid and last conductor of each ACTIVE node for the takeovers '
            'pending (one query, a row per ACTIVE node).'
        ),
    ),
]

ALL_OPTS = (
    TAG_OPTS + CAPACITY_OPTS + REBALANCE_OPTS + MEMBERSHIP_OPTS + IRONIC_OPTS
)


def register_opts(conf: cfg.ConfigOpts) -> None:
    """Register the [affinity] options on ``conf``."""
    conf.register_group(GROUP)
    conf.register_opts(ALL_OPTS, group=GROUP)


def list_opts() -> list[tuple[cfg.OptGroup, list[cfg.Opt]]]:
    """The options, for oslo-config-generator and the docs."""
    return [(GROUP, ALL_OPTS)]


def conductor_profile(
    conf: cfg.ConfigOpts,
    name: str,
    hardware_types: frozenset[str] | None = None,
    conductor_group: str = '',
) -> profile.ConductorProfile:
    """This conductor's profile as configured.

    :raises: ConflictingTags when the hard lists share a tag, naming the
        options and the tags: such a conductor is refused at start.
    """
    group = conf.affinity
    return profile.ConductorProfile(
        name=name,
        hard_affinity_tags=group.hard_affinity_tags,
        hard_anti_affinity_tags=group.hard_anti_affinity_tags,
        soft_affinity_tags=group.soft_affinity_tags,
        soft_anti_affinity_tags=group.soft_anti_affinity_tags,
        hardware_types=hardware_types,
        conductor_group=conductor_group.lower(),
        max_nodes=group.max_nodes,
        draining=group.drain,
    )
