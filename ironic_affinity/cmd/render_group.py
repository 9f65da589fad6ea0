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

"""The group's members as a table people read, from
:func:`ironic_affinity.report_group.members`."""

from typing import Any

from ironic_affinity import adoption
from ironic_affinity import profile
from ironic_affinity.cmd import render


def render_members(report: dict[str, Any]) -> str:
    """The members as a table people read."""
    age = report['age_seconds']
    parts = [
        'Group %s on %s, read %s'
        % (
            report['group'],
            report['backend'],
            'never' if age is None else '%.1f s ago' % age,
        )
    ]
    if report['error']:
        parts.append('Backend unreadable: %s' % report['error'])
    headers = [
        'CONDUCTOR',
        'GROUP',
        'HARDWARE TYPES',
        'HARD',
        'HARD ANTI',
        'SOFT',
        'SOFT ANTI',
    ]
    rows = [
        [
            m['name'] + (' (held)' if m['held_through_outage'] else ''),
            m['conductor_group'] or None,
            ', '.join(m['hardware_types'] or ['(all)']),
            ', '.join(m[profile.HARD_AFFINITY]) or None,
            ', '.join(m[profile.HARD_ANTI_AFFINITY]) or None,
            m[profile.SOFT_AFFINITY] or None,
            m[profile.SOFT_ANTI_AFFINITY] or None,
        ]
        for m in report['members']
    ]
    # Shown once any member uses capacity, so that the table of a
    # deployment without it is what it was.
    if any(m['max_nodes'] for m in report['members']):
        headers.append('MAX NODES')
        for row, member in zip(rows, report['members'], strict=True):
            row.append(member['max_nodes'] or None)
    if any(m['draining'] for m in report['members']):
        headers.append('DRAINING')
        for row, member in zip(rows, report['members'], strict=True):
            row.append('yes' if member['draining'] else None)
    # What each runs, while the members differ or any is pinned: in
    # the middle of a rolling upgrade.
    levels = [m['format_level'] for m in report['members']]
    if len({m['version'] for m in report['members']}) > 1 or any(
        found and found['writes'] < found['reads'] for found in levels
    ):
        headers += ['VERSION', 'FORMAT']
        for row, member in zip(rows, report['members'], strict=True):
            found = member['format_level']
            row += [
                member['version'] or '(older)',
                found
                and (
                    '%(reads)d, pinned to %(writes)d' % found
                    if found['writes'] < found['reads']
                    else str(found['reads'])
                ),
            ]
    # The same for a rollout: shown only while one is under way.
    if any(m['rollout_ends_at'] for m in report['members']):
        headers.append('ROLLOUT UNTIL')
        for row, member in zip(rows, report['members'], strict=True):
            ends = member['rollout_ends_at']
            row.append(
                None
                if ends is None
                else '%s (%s)'
                % (
                    render.moment(ends),
                    ', '.join(c['kind'] for c in member['changes']),
                )
            )
    # And the votes, while any conductor votes for Ironic's ring or the
    # deployment has switched.
    placed = report.get('placement')
    if placed is not None and (
        placed['state'] != 'affinity'
        or placed['due']
        or any(m['vote'] != adoption.AFFINITY for m in report['members'])
    ):
        headers.append('VOTE')
        for row, member in zip(rows, report['members'], strict=True):
            row.append(member['vote'])
    parts.append(render.table(headers, rows))
    for name, reason in report['rejected'].items():
        parts.append('Left out of placement: %s: %s' % (name, reason))
    if placed is not None and render.render_switching(placed):
        parts.append(render.render_switching(placed))
    return '\n'.join(parts)
