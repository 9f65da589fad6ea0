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

"""The affinity tag grammar, shared by conductors, nodes and scenarios.

A tag list is a string of items separated by commas and/or white space
(the RFE writes both ``rack10, network1`` and ``rack10 network1``), or a
list of such strings. An item is a tag, optionally followed by ``:WEIGHT``
where weights are allowed (the two soft lists only)::

    tag    = 1 to 64 of  A-Z a-z 0-9 . _ -   starting with a letter or digit
    weight = an integer from 1 to 1000; an item without one weighs 1

Tags compare case-insensitively, as Ironic's conductor groups do, so they
are stored lower-cased. Anything else is rejected with an
:class:`~ironic_affinity.exception.InvalidTag` naming where it came from
and the offending item: a typo must never silently become a tag that
matches nothing.
"""

from collections.abc import Iterable
import re

from ironic_affinity import exception
from ironic_affinity._i18n import _

MAX_TAG_LENGTH = 64
MAX_TAGS = 128
MAX_WEIGHT = 1000
DEFAULT_WEIGHT = 1

_TAG_RE = re.compile(r'[A-Za-z0-9][A-Za-z0-9._-]{0,%d}' % (MAX_TAG_LENGTH - 1))
_SEPARATORS_RE = re.compile(r'[\s,]+')
_WEIGHT_RE = re.compile(r'[0-9]{1,4}')

TagList = str | Iterable[str] | None

# Error messages quote at most this much of what they refuse: the input
# may be hostile and huge.
_QUOTE_LIMIT = 40


def quote(value: object) -> str:
    """How an error message shows a value from untrusted input.

    A string is shown cut short, anything else by its type only: the
    input may be huge, and repr() of a huge integer even raises.
    """
    if not isinstance(value, str):
        return '<%s>' % type(value).__name__
    if len(value) > _QUOTE_LIMIT:
        return repr(value[:_QUOTE_LIMIT]) + '...'
    return repr(value)


def _items(value: TagList, where: str) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        chunks = [value]
    elif isinstance(value, Iterable) and not isinstance(value, (bytes, dict)):
        chunks = list(value)
    else:
        raise exception.InvalidTag(
            _('%s: expected a string or a list of strings, got %s')
            % (where, type(value).__name__)
        )
    items: list[str] = []
    for chunk in chunks:
        if not isinstance(chunk, str):
            raise exception.InvalidTag(
                _('%(where)s: every tag must be a string, got a %(type)s')
                % {'where': where, 'type': type(chunk).__name__}
            )
        items.extend(i for i in _SEPARATORS_RE.split(chunk) if i)
    if len(items) > MAX_TAGS:
        raise exception.InvalidTag(
            _('%s: %d tags given, at most %d are allowed')
            % (where, len(items), MAX_TAGS)
        )
    return items


def _check_tag(tag: str, item: str, where: str) -> str:
    if not _TAG_RE.fullmatch(tag):
        if len(tag) > MAX_TAG_LENGTH:
            why = _('longer than %d characters') % MAX_TAG_LENGTH
        else:
            why = _(
                'a tag is letters, digits, ".", "_" and "-", '
                'starting with a letter or digit'
            )
        raise exception.InvalidTag(
            _('%s: invalid tag %s: %s') % (where, quote(item), why)
        )
    return tag.lower()


def _parse_weight(text: str, item: str, where: str) -> int:
    weight = int(text) if _WEIGHT_RE.fullmatch(text) else 0
    if not 1 <= weight <= MAX_WEIGHT:
        raise exception.InvalidTag(
            _('%s: invalid weight in %s: a weight is an integer from 1 to %d')
            % (where, quote(item), MAX_WEIGHT)
        )
    return weight


def parse_weighted_tags(value: TagList, where: str) -> dict[str, int]:
    """Parse a soft tag list into a mapping of tag to weight.

    :param value: a tag list string, a list of them, or None.
    :param where: names the source in error messages, e.g. an option name.
    :raises: InvalidTag naming ``where`` and the bad item.
    """
    weights: dict[str, int] = {}
    for item in _items(value, where):
        tag_text, sep, weight_text = item.partition(':')
        tag = _check_tag(tag_text, item, where)
        weight = (
            _parse_weight(weight_text, item, where) if sep else DEFAULT_WEIGHT
        )
        if weights.setdefault(tag, weight) != weight:
            raise exception.InvalidTag(
                _('%s: tag %r is given twice with different weights (%d, %d)')
                % (where, tag, weights[tag], weight)
            )
    return weights


def parse_tags(value: TagList, where: str) -> frozenset[str]:
    """Parse a tag list that takes no weights (hard lists, node tags).

    :raises: InvalidTag naming ``where`` and the bad item; a weight here
        is an error, since it would have no meaning.
    """
    tags = set()
    for item in _items(value, where):
        if ':' in item:
            raise exception.InvalidTag(
                _(
                    '%s: %s carries a weight, but only soft tag lists take '
                    'weights'
                )
                % (where, quote(item))
            )
        tags.add(_check_tag(item, item, where))
    return frozenset(tags)


def format_weighted(weights: dict[str, int]) -> str:
    """The canonical text of a soft tag list, as it would be configured."""
    return ', '.join(
        tag if weight == DEFAULT_WEIGHT else '%s:%d' % (tag, weight)
        for tag, weight in sorted(weights.items())
    )
