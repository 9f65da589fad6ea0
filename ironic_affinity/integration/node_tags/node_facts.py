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

"""What is published of a node, and the text it travels as.

A node's row becomes one text of four lines in the process that reads it
(:mod:`ironic_affinity.integration.node_tags.tag_reader`), and that text
becomes :class:`NodeFacts` again in every process that holds it
(:mod:`ironic_affinity.integration.node_tags.tag_follower`). Both directions
are here, so that the format has one owner: a text that does not come
apart as it was put together is never trusted, whoever wrote it.

What is published of a node is its hardware type and conductor group
beside its tags: the ring needs only the tags, but the placement metrics
place every node, which they can then do from memory, rather than each
reporting process reading the table. Its creation time is the last
line: a change of placement that began before a node was created moves
it at once, since no conductor held it before
(:mod:`ironic_affinity.schedule`), and every process must know that
alike.

Tags live in the node's ``extra`` field under a configurable key, as a
list or a comma/space separated string. A value outside the tag grammar
(written before the plugin checked values at the API) is published as no
tags, with one warning naming the node by the process that read it, so
the node is still placed.
"""

from collections.abc import Iterable
import dataclasses
import datetime
import json
import math
from typing import Any
import uuid as uuidlib

from oslo_log import log

from ironic_affinity import exception
from ironic_affinity import profile
from ironic_affinity import tags

LOG = log.getLogger(__name__)

NO_TAGS: frozenset[str] = frozenset()
# The columns read of each node.
COLUMNS = ('uuid', 'extra', 'driver', 'conductor_group', 'created_at')
# Between the parts of a node's published text: in none of them (tags,
# driver names and conductor groups are words of letters, digits, dots,
# dashes and underscores).
SEPARATOR = '\n'


@dataclasses.dataclass(frozen=True, slots=True)
class NodeFacts:
    """What is published of one node."""

    driver: str
    conductor_group: str
    tags: frozenset[str]
    # Seconds since the epoch, rounded up; None when Ironic has none.
    created_at: int | None = None


NO_FACTS = NodeFacts('', '', NO_TAGS)


def requests(
    nodes: Iterable[tuple[str, NodeFacts]], use_groups: bool = True
) -> list[profile.NodeRequest]:
    """(uuid, facts) as held here, as the engine takes them: named by
    uuid, as the ring looks nodes up; without groups (Ironic's rings
    built with ``use_groups=False``) every node is in group ''."""
    return [
        profile.NodeRequest(
            name=uuid,
            tags=facts.tags,
            uuid=uuid,
            driver=facts.driver or None,
            conductor_group=facts.conductor_group if use_groups else '',
            created_at=facts.created_at,
        )
        for uuid, facts in nodes
    ]


def tags_from_extra(extra: Any, key: str, node: str) -> frozenset[str]:
    """The affinity tags in a node's ``extra`` (a dict or its JSON text).

    :raises: InvalidTag naming the node and key for a bad value.
    """
    if isinstance(extra, str):
        extra = json.loads(extra) if extra else {}
    if not isinstance(extra, dict):
        return NO_TAGS
    return tags.parse_tags(extra.get(key), 'node %s extra.%s' % (node, key))


def is_uuid(ident: str) -> bool:
    # Ironic reads an identifier shaped like a uuid as one, never as a
    # name.
    try:
        return str(uuidlib.UUID(ident)) == ident.lower()
    except ValueError:
        return False


def created_seconds(created_at: Any) -> int | None:
    """A row's ``created_at`` (naive UTC, as Ironic stores it) in whole
    seconds since the epoch, rounded up: a node created in the second a
    change began counts as created after it."""
    if not isinstance(created_at, datetime.datetime):
        return None
    if created_at.tzinfo is None:
        created_at = created_at.replace(tzinfo=datetime.timezone.utc)
    return int(math.ceil(created_at.timestamp()))


def encode(
    driver: str, group: str, tag_text: str, created_at: int | None = None
) -> str:
    """A node as published: its hardware type, conductor group (in lower
    case, as Ironic matches it), tags (sorted and comma-separated) and
    creation time (empty when unknown), one per line."""
    return SEPARATOR.join(
        (
            driver,
            group.lower(),
            tag_text,
            '' if created_at is None else str(created_at),
        )
    )


def encode_facts(facts: NodeFacts) -> str:
    """The text that a node's facts were decoded from."""
    return encode(
        facts.driver,
        facts.conductor_group,
        ','.join(sorted(facts.tags)),
        facts.created_at,
    )


def decode(text: str) -> NodeFacts:
    """A node's facts from its published text; none from a text that
    this module did not write."""
    return Decoder().decode(text)


class Decoder:
    """Published texts as facts, with one object per distinct hardware
    type, group and tags, shared by the nodes that have them and told
    apart by creation time alone (about 100 bytes a node, measured)."""

    def __init__(self) -> None:
        self._shared: dict[str, NodeFacts] = {}

    def decode(self, text: str) -> NodeFacts:
        base, found, created = text.rpartition(SEPARATOR)
        # ASCII digits, as encode() writes them: str.isdigit() takes other
        # scripts' digits too, which int() refuses, and a time needs 11.
        if not found or (
            created
            and not (
                len(created) <= 12 and created.isascii() and created.isdigit()
            )
        ):
            return NO_FACTS
        if len(self._shared) > 16384:
            # Nodes share a few hundred tag sets; this many means sets
            # that no node carries any more are kept: start again.
            self._shared = {}
        facts = self._shared.get(base)
        if facts is None:
            facts = self._shared[base] = _decode_base(base)
        if not created or facts is NO_FACTS:
            return facts
        return dataclasses.replace(facts, created_at=int(created))


def _decode_base(base: str) -> NodeFacts:
    parts = base.rsplit(SEPARATOR, 2)
    if len(parts) != 3:
        return NO_FACTS
    try:
        node_tags = tags.parse_tags(parts[2], 'published node tags')
    except exception.InvalidTag:
        node_tags = NO_TAGS
    return NodeFacts(parts[0], parts[1], node_tags)


class RowEncoder:
    """Nodes' rows as published, warning once per node and value of tags
    that cannot be used."""

    def __init__(self, key: str) -> None:
        """:param key: the key of the tags in a node's ``extra``."""
        self.key = key
        self._bad: dict[str, str] = {}

    def encode(
        self,
        uuid: str,
        extra: Any,
        driver: str | None,
        group: str | None,
        created_at: Any = None,
        warn: bool = True,
    ) -> str:
        """A node's row (see :data:`COLUMNS`) as held.

        :param warn: warn of unusable tags: the reader of the table
            does, one process for the deployment; a row read for a
            lookup is placed the same way without a warning of its own.
        """
        return encode(
            driver or '',
            group or '',
            self._tag_text(uuid, extra, warn),
            created_seconds(created_at),
        )

    def _tag_text(self, uuid: str, extra: Any, warn: bool = True) -> str:
        try:
            node_tags = tags_from_extra(extra, self.key, uuid)
        except (exception.InvalidTag, ValueError) as exc:
            if not warn:
                return ''
            # Once per node and value: the row is read again by every full
            # read.
            if self._bad.get(uuid) != str(exc):
                LOG.warning(
                    'Node %(node)s has unusable affinity tags and is placed '
                    'as untagged until they are fixed: %(error)s',
                    {'node': uuid, 'error': exc},
                )
            self._bad[uuid] = str(exc)
            return ''
        self._bad.pop(uuid, None)
        return ','.join(sorted(node_tags))
