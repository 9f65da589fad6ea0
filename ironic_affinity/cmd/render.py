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

"""The tables the operator commands print, rendered from the reports
(:mod:`ironic_affinity.report`) that ``--format json`` prints as they
are: both formats always say the same."""

from collections.abc import Collection
from collections.abc import Mapping
from collections.abc import Sequence
import time
from typing import Any

from ironic_affinity import adoption

# Untagged nodes named in check's table; -f json lists them all.
UNTAGGED_SHOWN = 10


def moment(at: float) -> str:
    """A time (seconds since the epoch) as people read it: UTC, to the
    second."""
    return time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime(at))


def table(
    headers: Sequence[str],
    rows: Sequence[Sequence[Any]],
    formats: Mapping[int, Any] | None = None,
) -> str:
    """:param formats: by column, how to print its values."""
    shown = formats or {}
    cells = [[str(h) for h in headers]] + [
        [
            '-' if c is None else str(shown[i](c) if i in shown else c)
            for i, c in enumerate(row)
        ]
        for row in rows
    ]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    return '\n'.join(
        '  '.join(
            c.ljust(w) for c, w in zip(row, widths, strict=True)
        ).rstrip()
        for row in cells
    )


def _note(row: dict[str, Any]) -> str | None:
    if 'pending' in row:
        last = row['pending'][-1]
        return 'moves to %s at %s' % (last['to'], moment(last['at']))
    if 'spilled_from' in row:
        return 'spilled: %s full' % row['spilled_from']
    if row.get('over_capacity'):
        return 'over capacity: every way out full'
    return None


def render_plan(report: dict[str, Any], down: Collection[str] = ()) -> str:
    """The plan as tables: placements, loads, orphans and moves."""
    placements = report['placements']
    capacities = report.get('capacities')
    headers: tuple[str, ...] = ('NODE', 'CONDUCTOR', 'SCORE', 'TIED AT TOP')
    rows = [
        [p['node'], p['conductor'], p['score'], ', '.join(p['tied']) or None]
        for p in placements
    ]
    rolling = report.get('rollout')
    if capacities is not None or rolling is not None:
        headers += ('NOTE',)
        for row, shown in zip(rows, placements, strict=True):
            row.append(_note(shown))
    load_rows: list[tuple[Any, ...]] = sorted(report['loads'].items())
    load_headers: tuple[str, ...] = ('CONDUCTOR', 'NODES')
    if capacities is not None:
        load_headers += ('MAX NODES', 'OVER')
        load_rows = [
            (
                name,
                count,
                capacities.get(name) or None,
                report['over_capacity'].get(name),
            )
            for name, count in load_rows
        ]
    parts = [
        'Placements',
        table(headers, rows),
        '',
        'Loads' + (' (down: %s)' % ', '.join(sorted(down)) if down else ''),
        table(load_headers, load_rows),
        '',
    ]
    if capacities is not None:
        over = report['over_capacity']
        parts.append(
            'Nodes spilled from a full first choice: %d; conductors over '
            'capacity: %s'
            % (
                report['spilled'],
                ', '.join('%s (+%d)' % item for item in sorted(over.items()))
                or 'none',
            )
        )
    if rolling is not None:
        parts.append(
            'Rollout under way until %s: %d node(s) still to move'
            % (moment(rolling['ends_at']), rolling['nodes_to_move'])
        )
    unplaced = report['unplaced']
    parts.append(
        'Nodes without a valid conductor: %s'
        % (', '.join(unplaced) if unplaced else 'none')
    )
    if rolling is not None and rolling['nodes_to_move']:
        parts += ['', 'Pending moves']
        parts.append(
            table(
                ('NODE', 'FROM', 'TO', 'AT'),
                sorted(
                    (
                        (p['node'], move['from'], move['to'], move['at'])
                        for p in placements
                        for move in p.get('pending', ())
                    ),
                    key=lambda row: (row[3], row[0]),
                ),
                formats={3: moment},
            )
        )
    if 'moves' in report:
        parts += ['', 'Moves (against every conductor up)']
        moves = report['moves']
        parts.append(
            table(
                ('NODE', 'FROM', 'TO'),
                [(m['node'], m['from'], m['to']) for m in moves],
            )
            if moves
            else 'none'
        )
    return '\n'.join(parts)


def _verdict_text(row: dict[str, Any]) -> str:
    if row['verdict'] in ('down', 'excluded'):
        return ': '.join(filter(None, (row['verdict'], row.get('reason'))))
    detail = ', '.join('%s %+d' % (tag, w) for tag, w in row['breakdown'])
    text = '%s, score %d%s%s' % (
        row['verdict'],
        row['score'],
        ' (%s)' % detail if detail else '',
        ', draining' if row.get('draining') else '',
    )
    if 'load' in row:
        text += ', %d node(s) of %s' % (
            row['load'],
            row['max_nodes'] or 'no limit',
        )
    return text


def _placed_text(report: dict[str, Any]) -> str:
    text = report['conductor'] or 'no valid conductor'
    if report.get('pending'):
        text += ' (%s; rollout under way until %s)' % (
            ', then '.join(
                'moves to %s at %s' % (m['to'], moment(m['at']))
                for m in report['pending']
            ),
            moment(report['rollout_ends_at']),
        )
    elif 'rollout_ends_at' in report:
        text += ' (where it stays: rollout under way until %s)' % moment(
            report['rollout_ends_at']
        )
    if 'spilled_from' in report:
        text += (
            ' (spilled: its first choice %s is full)'
            % (report['spilled_from'])
        )
    elif report.get('over_capacity'):
        text += (
            ' (over capacity: every conductor it may use is full, so its '
            'first choice takes it anyway)'
        )
    return text


def render_explain(report: dict[str, Any]) -> str:
    """The verdicts as a table people read."""
    return '\n'.join(
        [
            'Node %s (hash key %r), tags: %s'
            % (
                report['node'],
                report['hash_key'],
                ', '.join(report['tags']) or '(none)',
            ),
            table(
                ('CONDUCTOR', 'VERDICT'),
                [
                    (r['conductor'], _verdict_text(r))
                    for r in report['conductors']
                ],
            ),
            'Placed on: %s' % _placed_text(report),
            'Fallback order: %s' % (' > '.join(report['fallback']) or 'none'),
        ]
    )


def render_switching(report: dict[str, Any]) -> str:
    """One line, or two, on the switch: empty while every node is placed
    by affinity, nothing is due and no takeover is pending, so that the
    output of a deployment that never switched, once settled, is what it
    was."""
    takeovers = report.get('takeovers_pending') or 0
    if report['state'] == 'affinity' and not report['due'] and not takeovers:
        return ''
    if report['state'] == 'switching':
        line = 'Placement: switching to %s since %s, until %s' % (
            _side_name(report['to']),
            moment(report['since']),
            moment(report['ends_at']),
        )
        if 'nodes_to_move' in report:
            line += '; %d node(s) still to move' % report['nodes_to_move']
    else:
        line = 'Placement: %s' % _side_name(report['state'])
    if report['due']:
        line += '; a switch to %s is due, recorded by %s' % (
            _side_name(report['to']),
            report['recorder'],
        )
    if takeovers:
        line += '; %d takeover(s) pending' % takeovers
    lines = [line]
    if report['stock_voters']:
        lines.append(
            "  voting for Ironic's ring (hash_ring_manager = stock): %s"
            % ', '.join(report['stock_voters'])
        )
    if report['outsiders'] and report['state'] != 'affinity':
        lines.append(
            '  active in Ironic but not in the affinity group (without '
            "the plugin, they place by Ironic's ring): %s"
            % ', '.join(report['outsiders'])
        )
    return '\n'.join(lines)


def _side_name(side: str) -> str:
    return "Ironic's ring (stock)" if side == adoption.STOCK else side


def render_check(report: dict[str, Any]) -> str:
    """The check as text people read."""
    parts = [
        '%d node(s) over %d live conductor(s)'
        % (report['nodes'], report['conductors'])
    ]
    placed = report.get('placement')
    if placed is not None and render_switching(placed):
        parts.append(render_switching(placed))
    if report.get('not_members') and (
        placed is None or placed['state'] == 'affinity'
    ):
        parts.append(
            'Active in Ironic but not in the affinity group (given no '
            'node): %s' % ', '.join(report['not_members'])
        )
    parts.append('Nodes with no valid conductor: %d' % len(report['orphans']))
    for orphan in report['orphans']:
        reasons = '; '.join(
            '%s: %s' % item for item in sorted(orphan['reasons'].items())
        )
        parts.append(
            '  %s (tags: %s): %s'
            % (
                orphan['node'],
                ', '.join(orphan['tags']) or '(none)',
                reasons or 'no live conductor',
            )
        )
    parts.append(
        'Nodes with only one valid conductor: %d'
        % len(report['single_conductor'])
    )
    for spof in report['single_conductor']:
        parts.append('  %s: %s' % (spof['node'], spof['conductor']))
    over = report.get('over_capacity', {})
    if over:
        parts.append('Conductors over max_nodes: %d' % len(over))
    for name, figures in sorted(over.items()):
        parts.append(
            '  %s: %d node(s) for max_nodes %d (every conductor their '
            'nodes may use is full)'
            % (name, figures['nodes'], figures['max_nodes'])
        )
    untagged = report.get('untagged', [])
    if untagged:
        shown = ', '.join(untagged[:UNTAGGED_SHOWN])
        more = len(untagged) - UNTAGGED_SHOWN
        parts.append(
            'Nodes without tags: %d (%s%s)'
            % (len(untagged), shown, ', ...' if more > 0 else '')
        )
    unused = report.get('unused_tags', {})
    if unused:
        parts.append(
            "Node tags no conductor's list mentions: %s"
            % ', '.join('%s (%d node(s))' % i for i in unused.items())
        )
    return '\n'.join(parts)
