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

"""What a conductor publishes about itself in the group, and back.

Capabilities come from other processes, so decoding treats them as
untrusted: a bounded size, a known format version, the same tag grammar
as the options. A member whose capabilities fail any check is left out of
placement (with a warning, by the caller) rather than trusted or crashed
on.

The compatibility rule: optional keys are absent when empty, and a
reader takes their absence as the default; a reader ignores keys it does
not know (saying so once, at DEBUG), so that a newer process may add
one; a key that an older reader would wrongly ignore has a higher format
level (:mod:`ironic_affinity.membership.levels`), published only when
``[affinity]pin_format`` allows; a change that an older reader would
misread bumps :data:`FORMAT_VERSION`, which readers refuse rather than
guess. What the process runs (its version, its levels) is published
beside the profile and read leniently, by ``levels.runs_of``.
"""

import dataclasses
import json
import logging
from typing import Any

from oslo_log import log

from ironic_affinity import adoption
from ironic_affinity import exception
from ironic_affinity import outage
from ironic_affinity import profile
from ironic_affinity import schedule
from ironic_affinity import tags
from ironic_affinity._i18n import _
from ironic_affinity.membership import checks
from ironic_affinity.membership import levels

FORMAT_VERSION = 1
MAX_ENCODED_BYTES = 64 * 1024
MAX_HARDWARE_TYPES = 256
MAX_NAME_LENGTH = 255

DRAINING = 'draining'
# Each key with its format level (membership/levels.py): what decoding
# knows, and what encoding publishes under [affinity]pin_format.
_KEYS = {
    'format': 1,
    **dict.fromkeys(profile.TAG_OPTIONS, 1),
    'hardware_types': 1,
    'conductor_group': 1,
    'max_nodes': 1,
    'changes': 1,
    'switching': 1,
    **levels.DESCRIPTIVE,
    DRAINING: 2,
}
_CHANGE_KEYS = dict.fromkeys(('before', 'at', 'period'), 1)
_SWITCHING_KEYS = dict.fromkeys(('vote', 'since', 'period', 'switches'), 1)
_SWITCH_KEYS = dict.fromkeys(('to', 'at', 'period'), 1)
# Bounds of a published change: a week-long rollout is already beyond any
# use; a time before 2001 or after 5138 is a broken clock or garbage.
MAX_PERIOD = 7 * 24 * 3600
_EARLIEST = 1e9
_LATEST = 1e11

LOG = log.getLogger(__name__)
# By member and where in its entry: the keys ignored, logged once.
_IGNORED: outage.Conditions[tuple[str, str]] = outage.Conditions(LOG)


def encode(
    conductor: profile.ConductorProfile, level: int = levels.LEVEL
) -> dict[str, Any]:
    """The capabilities of a conductor: plain JSON types, canonical;
    ``max_nodes``, ``draining``, ``changes`` and ``switching`` only when
    set, and only the keys of ``level`` (the pin) and below."""
    found: dict[str, Any] = {
        'format': FORMAT_VERSION,
        profile.HARD_AFFINITY: sorted(conductor.hard_affinity_tags),
        profile.HARD_ANTI_AFFINITY: sorted(conductor.hard_anti_affinity_tags),
        profile.SOFT_AFFINITY: dict(
            sorted(conductor.soft_affinity_tags.items())
        ),
        profile.SOFT_ANTI_AFFINITY: dict(
            sorted(conductor.soft_anti_affinity_tags.items())
        ),
        'hardware_types': (
            None
            if conductor.hardware_types is None
            else sorted(conductor.hardware_types)
        ),
        'conductor_group': conductor.conductor_group,
    }
    if conductor.max_nodes:
        found['max_nodes'] = conductor.max_nodes
    if conductor.draining:
        found[DRAINING] = True
    if conductor.changes:
        found['changes'] = [
            levels.at_level(
                {
                    'before': (
                        None
                        if change.before is None
                        # Only its tags: a switch is the member's, not
                        # the profile's.
                        else encode(
                            dataclasses.replace(change.before, switching=None),
                            level,
                        )
                    ),
                    'at': change.at,
                    'period': change.period,
                },
                _CHANGE_KEYS,
                level,
            )
            for change in conductor.changes
        ]
    if conductor.switching is not None:
        # Set for a conductor that votes for Ironic's ring or knows of a
        # switch (see adoption.agree).
        vote = conductor.switching.vote
        found['switching'] = levels.at_level(
            {
                'vote': vote.side,
                'since': vote.since,
                'period': vote.period,
                'switches': [
                    levels.at_level(
                        {'to': s.to, 'at': s.at, 'period': s.period},
                        _SWITCH_KEYS,
                        level,
                    )
                    for s in conductor.switching.switches
                ],
            },
            _SWITCHING_KEYS,
            level,
        )
    return levels.at_level(found, _KEYS, level)


def fit(conductor: profile.ConductorProfile) -> profile.ConductorProfile:
    """The conductor, without as many of its oldest changes as it takes
    for its capabilities to stay within the size readers accept."""
    while (
        conductor.changes
        and len(json.dumps(encode(conductor))) > MAX_ENCODED_BYTES
    ):
        conductor = dataclasses.replace(
            conductor, changes=conductor.changes[1:]
        )
    return conductor


def _known(
    name: str, where: str, found: dict[str, Any], known: dict[str, int]
) -> None:
    """Say once, at DEBUG, which keys of a member's mapping this reader
    ignores."""
    # Quoted: a key may be any JSON scalar, of any length.
    unknown = tuple(sorted(tags.quote(k) for k in set(found) - known.keys()))
    if unknown:
        _IGNORED.raised(
            (name, where),
            unknown,
            'Conductor %(name)s publishes %(where)s key(s) this reader '
            'does not know, ignored: %(keys)s',
            {'name': name, 'where': where, 'keys': ', '.join(unknown)},
            level=logging.DEBUG,
        )
    else:
        _IGNORED.cleared((name, where))


def _changes(name: str, value: Any) -> tuple[profile.ProfileChange, ...]:
    if not isinstance(value, list) or not 0 < len(value) <= schedule.MAX_KEPT:
        raise exception.InvalidCapabilities(
            _('changes must be a list of 1 to %d changes') % schedule.MAX_KEPT
        )
    found = []
    for index, change in enumerate(value):
        where = 'changes[%d]' % index
        if (
            not isinstance(change, dict)
            or not _CHANGE_KEYS.keys() <= change.keys()
        ):
            raise exception.InvalidCapabilities(
                _('%s must be a mapping of before, at and period') % where
            )
        _known(name, where, change, _CHANGE_KEYS)
        before = change['before']
        if before is not None:
            if isinstance(before, dict) and 'changes' in before:
                raise exception.InvalidCapabilities(
                    _('%s.before must not have changes of its own') % where
                )
            try:
                before = _decode(name, before, where + '.before')
            except exception.InvalidCapabilities as exc:
                raise exception.InvalidCapabilities(
                    '%s.before: %s' % (where, exc)
                ) from exc
        found.append(
            profile.ProfileChange(
                before,
                checks.number(change['at'], _EARLIEST, _LATEST, where + '.at'),
                checks.number(
                    change['period'], 1e-3, MAX_PERIOD, where + '.period'
                ),
            )
        )
    return tuple(found)


def _side(value: Any, where: str) -> str:
    if value not in adoption.SIDES:
        raise exception.InvalidCapabilities(
            _('%(where)s must be one of %(sides)s, not %(got)s')
            % {
                'where': where,
                'sides': ', '.join(adoption.SIDES),
                'got': checks.shown(value),
            }
        )
    return str(value)


def _switching(name: str, value: Any) -> adoption.Published:
    if (
        not isinstance(value, dict)
        or not _SWITCHING_KEYS.keys() <= value.keys()
    ):
        raise exception.InvalidCapabilities(
            _('switching must be a mapping of vote, since, period, switches')
        )
    _known(name, 'switching', value, _SWITCHING_KEYS)
    switches = value['switches']
    if not isinstance(switches, list) or len(switches) > schedule.MAX_KEPT:
        raise exception.InvalidCapabilities(
            _('switching.switches must be a list of at most %d switches')
            % schedule.MAX_KEPT
        )
    found = []
    for index, switch in enumerate(switches):
        where = 'switching.switches[%d]' % index
        if (
            not isinstance(switch, dict)
            or not _SWITCH_KEYS.keys() <= switch.keys()
        ):
            raise exception.InvalidCapabilities(
                _('%s must be a mapping of to, at and period') % where
            )
        _known(name, where, switch, _SWITCH_KEYS)
        found.append(
            adoption.Switch(
                _side(switch['to'], where + '.to'),
                # The origin of a history is before any real time.
                checks.number(
                    switch['at'],
                    adoption.ORIGIN_AT,
                    _LATEST,
                    where + '.at',
                ),
                checks.number(
                    switch['period'], 0, MAX_PERIOD, where + '.period'
                ),
            )
        )
    return adoption.Published(
        adoption.Vote(
            _side(value['vote'], 'switching.vote'),
            checks.number(
                value['since'], _EARLIEST, _LATEST, 'switching.since'
            ),
            checks.number(value['period'], 0, MAX_PERIOD, 'switching.period'),
        ),
        tuple(found),
    )


def decode(name: str, raw: Any) -> profile.ConductorProfile:
    """The profile a member published.

    :param name: the member's name in the group.
    :param raw: its capabilities as the tooz driver returns them.
    :raises: InvalidCapabilities saying what is wrong.
    """
    return _decode(name, raw, 'top-level')


def _decode(name: str, raw: Any, where: str) -> profile.ConductorProfile:
    if isinstance(raw, (bytes, str)):
        if len(raw) > MAX_ENCODED_BYTES:
            raise exception.InvalidCapabilities(_('larger than 64 KiB'))
        try:
            raw = json.loads(raw) if raw else None
        except (ValueError, RecursionError) as exc:
            raise exception.InvalidCapabilities(
                _('not JSON: %s') % exc
            ) from exc
    if not isinstance(raw, dict):
        raise exception.InvalidCapabilities(
            _('missing, or not a mapping (an older or foreign member?)')
        )
    try:
        size = len(json.dumps(raw))
    except (TypeError, ValueError, RecursionError) as exc:
        raise exception.InvalidCapabilities(
            _('not plain data: %s') % exc
        ) from exc
    if size > MAX_ENCODED_BYTES:
        raise exception.InvalidCapabilities(_('larger than 64 KiB'))
    version = raw.get('format')
    if version != FORMAT_VERSION:
        raise exception.InvalidCapabilities(
            _('format version %(got)s, this reader knows %(known)d')
            % {'got': checks.shown(version), 'known': FORMAT_VERSION}
        )
    _known(name, where, raw, _KEYS)
    hardware_types = raw.get('hardware_types')
    if hardware_types is not None:
        if (
            not isinstance(hardware_types, list)
            or len(hardware_types) > MAX_HARDWARE_TYPES
        ):
            raise exception.InvalidCapabilities(
                _('hardware_types must be a list of at most %d strings')
                % MAX_HARDWARE_TYPES
            )
        hardware_types = [
            checks.string(h, 'hardware_types', MAX_NAME_LENGTH)
            for h in hardware_types
        ]
    draining = raw.get(DRAINING, False)
    if not isinstance(draining, bool):
        raise exception.InvalidCapabilities(
            _('draining must be true or false, not %s')
            % checks.shown(draining)
        )
    try:
        return profile.ConductorProfile(
            name=name,
            hard_affinity_tags=tags.parse_tags(
                raw.get(profile.HARD_AFFINITY), profile.HARD_AFFINITY
            ),
            hard_anti_affinity_tags=tags.parse_tags(
                raw.get(profile.HARD_ANTI_AFFINITY),
                profile.HARD_ANTI_AFFINITY,
            ),
            soft_affinity_tags=checks.weighted(
                raw.get(profile.SOFT_AFFINITY, {}), profile.SOFT_AFFINITY
            ),
            soft_anti_affinity_tags=checks.weighted(
                raw.get(profile.SOFT_ANTI_AFFINITY, {}),
                profile.SOFT_ANTI_AFFINITY,
            ),
            hardware_types=(
                None if hardware_types is None else frozenset(hardware_types)
            ),
            conductor_group=checks.string(
                raw.get('conductor_group', ''),
                'conductor_group',
                MAX_NAME_LENGTH,
            ).lower(),
            max_nodes=checks.whole(
                raw.get('max_nodes', 0), profile.MAX_NODES_LIMIT, 'max_nodes'
            ),
            draining=draining,
            changes=(
                _changes(name, raw['changes']) if 'changes' in raw else ()
            ),
            switching=(
                _switching(name, raw['switching'])
                if 'switching' in raw
                else None
            ),
        )
    except (exception.InvalidTag, exception.ConflictingTags) as exc:
        raise exception.InvalidCapabilities(str(exc)) from exc
