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

"""Checks of values read from other processes' entries: untrusted, so
each is of the type and within the bounds the format says, or refused
with InvalidCapabilities naming where it was."""

import math
from typing import Any

from ironic_affinity import exception
from ironic_affinity import tags
from ironic_affinity._i18n import _


def weighted(value: Any, where: str) -> dict[str, int]:
    if not isinstance(value, dict):
        raise exception.InvalidCapabilities(
            _('%s must be a mapping of tag to weight') % where
        )
    items = []
    for tag, weight in value.items():
        # bool is an int to Python; a weight of "true" is garbage here.
        if not isinstance(weight, int) or isinstance(weight, bool):
            raise exception.InvalidCapabilities(
                _('%(where)s: weight of %(tag)s is not an integer')
                % {'where': where, 'tag': tags.quote(tag)}
            )
        items.append('%s:%d' % (tag, weight))
    return tags.parse_weighted_tags(items, where)


def string(value: Any, where: str, longest: int) -> str:
    # Lower-cased before measuring: lower-casing can lengthen a string
    # (U+0130 becomes two characters), and what is accepted here must
    # survive being encoded and decoded again.
    if not isinstance(value, str) or len(value.lower()) > longest:
        raise exception.InvalidCapabilities(
            _('%(where)s must be a string of at most %(max)d characters')
            % {'where': where, 'max': longest}
        )
    return value


def whole(value: Any, highest: int, where: str) -> int:
    if type(value) is not int or not 0 <= value <= highest:
        raise exception.InvalidCapabilities(
            _(
                '%(where)s must be a whole number from 0 to %(max)d, '
                'not %(got)s'
            )
            % {'where': where, 'max': highest, 'got': shown(value)}
        )
    return value


def number(value: Any, low: float, high: float, where: str) -> float:
    if (
        type(value) not in (int, float)
        or not math.isfinite(value)
        or not low <= value <= high
    ):
        raise exception.InvalidCapabilities(
            _(
                '%(where)s must be a number from %(low)s to %(high)s, not '
                '%(got)s'
            )
            % {'where': where, 'low': low, 'high': high, 'got': shown(value)}
        )
    return float(value)


def shown(value: Any) -> str:
    """A value from a member, short enough for one line of a message."""
    if value is None or isinstance(value, bool):
        return repr(value)
    if type(value) is int and abs(value) < 10**6:
        return str(value)
    return tags.quote(value)
